#!/usr/bin/env python3
"""Writes crates/crewai-llm/data/litellm_models.json: the prices and context windows of every
text model LiteLLM knows, converted from the `model_prices_and_context_window` JSON that the
`litellm` package ships, with the package version and the file's sha256 recorded.

    pip download --no-deps litellm==1.110.2 -d /tmp/litellm
    python3 scripts/litellm_models.py /tmp/litellm/litellm-1.110.2-*.whl

Only chat, completion, responses and embedding models with both an input and an output price
are kept; prices become USD per million tokens (our table's unit), `max_input_tokens` the
context window. Entries are keyed by LiteLLM's name, lowercased (`gpt-4o-mini`,
`groq/llama-3.1-8b-instant`): crewai-llm looks a model up by the name the user wrote, then by
its bare name (see crates/crewai-llm/src/litellm_models.rs).
"""

import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

MEMBER = "litellm/model_prices_and_context_window_backup.json"
TEXT_MODES = {"chat", "completion", "responses", "embedding"}
OUT = Path(__file__).resolve().parent.parent / "crates/crewai-llm/data/litellm_models.json"


def per_million(cost):
    # Rounded to 6 significant digits: the source's floats (3e-07 * 1e6) would otherwise carry
    # binary noise such as 0.30000000000000004 into the table.
    return float(f"{cost * 1_000_000:.6g}")


def convert(entry):
    if entry.get("mode") not in TEXT_MODES:
        return None
    inp, out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(inp, (int, float)) or not isinstance(out, (int, float)) or inp < 0 or out < 0:
        return None
    model = {"input": per_million(inp), "output": per_million(out)}
    for ours, theirs in (("cached_input", "cache_read_input_token_cost"),
                         ("cache_write", "cache_creation_input_token_cost")):
        value = entry.get(theirs)
        if isinstance(value, (int, float)) and value >= 0:
            model[ours] = per_million(value)
    window = entry.get("max_input_tokens")
    if isinstance(window, int) and window > 0:
        model["context_window"] = window
    return model


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    wheel = Path(sys.argv[1])
    version = re.match(r"litellm-([^-]+)-", wheel.name)
    if not version:
        sys.exit(f"{wheel}: not a litellm wheel (litellm-VERSION-....whl)")
    with zipfile.ZipFile(wheel) as archive:
        raw = archive.read(MEMBER)
    source = json.loads(raw)
    models = {}
    for name, entry in source.items():
        if name == "sample_spec" or not isinstance(entry, dict):
            continue
        model = convert(entry)
        if model is not None:
            models[name.strip().lower()] = model
    table = {
        "source": {
            "package": "litellm",
            "version": version.group(1),
            "file": MEMBER,
            "sha256": hashlib.sha256(raw).hexdigest(),
            "converted_by": "scripts/litellm_models.py",
        },
        "models": dict(sorted(models.items())),
    }
    # One model per line: reviewable diffs when the table is regenerated.
    lines = [json.dumps(name) + ": " + json.dumps(model, separators=(",", ":"))
             for name, model in table["models"].items()]
    text = ('{"source": ' + json.dumps(table["source"]) + ',\n"models": {\n'
            + ",\n".join(lines) + "\n}}\n")
    OUT.write_text(text)
    print(f"{OUT}: {len(models)} models from litellm {version.group(1)}")


if __name__ == "__main__":
    main()
