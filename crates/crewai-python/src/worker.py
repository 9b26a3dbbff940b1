"""crewai-rs Python tool worker.

Serves a CrewAI project's own tools (BaseTool subclasses and @tool functions) over MCP: JSON-RPC
2.0, one message per line on stdin/stdout. Standard library only; the tools bring their own
dependencies (pydantic, usually). When CrewAI itself is not installed, a small stand-in for
`crewai.tools` is installed so that a project's tool modules import unchanged.

Usage: python worker.py SPEC.json

SPEC.json: {"project_root": str, "load_report": str, "tools": [{"key", "module", "module_file",
"attr", "kwargs", "is_function"}]}. When a tool cannot be loaded the worker writes the failures
to `load_report` as JSON and exits with status 3, before answering anything.
"""

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import sys
import threading
import traceback
import types

LOAD_FAILED_EXIT = 3
LATEST_PROTOCOL = "2025-06-18"
KNOWN_PROTOCOLS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603


# --- The protocol channel -------------------------------------------------------------------
#
# A tool that prints (or a C extension writing to fd 1) must not corrupt the JSON-RPC stream, and
# one that reads stdin must not eat requests: the protocol keeps private copies of fds 0 and 1,
# fd 1 is pointed at stderr and fd 0 at /dev/null.

def _take_protocol_channel():
    protocol_in = os.fdopen(os.dup(0), "rb", buffering=0)
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    return protocol_in, protocol_out


class Channel:
    def __init__(self, reader, writer):
        self._reader = reader
        self._writer = writer
        self._lock = threading.Lock()

    def messages(self):
        buffered = b""
        while True:
            chunk = self._reader.read(65536)
            if not chunk:
                return
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                if line.strip():
                    yield line

    def send(self, message):
        data = json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n"
        with self._lock:
            self._writer.write(data)
            self._writer.flush()

    def result(self, request_id, result):
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def error(self, request_id, code, message):
        self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


# --- The stand-in for crewai.tools ------------------------------------------------------------

def _crewai_importable():
    try:
        return importlib.util.find_spec("crewai") is not None
    except (ImportError, ValueError):
        return False


def _install_crewai_shim():
    """Registers `crewai`, `crewai.tools` and `crewai.tools.base_tool` modules providing
    `BaseTool`, `Tool`, `EnvVar` and `tool`, the parts of CrewAI a tool module imports."""
    from typing import Any, Callable, List, Optional, Type

    from pydantic import BaseModel, ConfigDict, Field, create_model

    class EnvVar(BaseModel):
        name: str
        description: str
        required: bool = True
        default: Optional[str] = None

    def schema_from_signature(function, model_name):
        fields = {}
        for parameter in inspect.signature(function).parameters.values():
            if parameter.name == "self" or parameter.kind in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            ):
                continue
            annotation = (
                Any if parameter.annotation is inspect.Parameter.empty else parameter.annotation
            )
            default = ... if parameter.default is inspect.Parameter.empty else parameter.default
            fields[parameter.name] = (annotation, default)
        return create_model(model_name, **fields)

    class BaseTool(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)

        name: str
        description: str
        args_schema: Optional[Type[BaseModel]] = Field(default=None, validate_default=False)
        env_vars: List[EnvVar] = []
        result_as_answer: bool = False
        max_usage_count: Optional[int] = None
        current_usage_count: int = 0
        cache_function: Callable = lambda _args=None, _result=None: True

        def model_post_init(self, __context):
            if self.args_schema is None:
                self.args_schema = schema_from_signature(
                    _implementation(self), type(self).__name__ + "Schema"
                )

        def _run(self, *args, **kwargs):
            raise NotImplementedError(type(self).__name__ + " does not implement _run")

        def run(self, *args, **kwargs):
            result = self._run(*args, **kwargs)
            if inspect.iscoroutine(result):
                result = asyncio.run(result)
            self.current_usage_count += 1
            return result

    class Tool(BaseTool):
        func: Callable

        def model_post_init(self, __context):
            if self.args_schema is None:
                self.args_schema = schema_from_signature(
                    self.func, self.name.replace(" ", "") + "Schema"
                )

        def _run(self, *args, **kwargs):
            return self.func(*args, **kwargs)

    def tool(*args, result_as_answer=False, max_usage_count=None):
        def make(name):
            def wrap(function):
                if not function.__doc__:
                    raise ValueError(
                        "the function " + function.__name__ + " has no docstring; @tool uses it "
                        "as the tool's description"
                    )
                return Tool(
                    name=name,
                    description=inspect.cleandoc(function.__doc__),
                    func=function,
                    result_as_answer=result_as_answer,
                    max_usage_count=max_usage_count,
                )

            return wrap

        if len(args) == 1 and callable(args[0]):
            return make(args[0].__name__)(args[0])
        if len(args) == 1 and isinstance(args[0], str):
            return make(args[0])
        if not args:
            return lambda function: make(function.__name__)(function)
        raise ValueError("@tool takes a function or a tool name")

    crewai = types.ModuleType("crewai")
    crewai.__path__ = []
    crewai.__crewai_rs_shim__ = True
    tools = types.ModuleType("crewai.tools")
    tools.__path__ = []
    base_tool = types.ModuleType("crewai.tools.base_tool")
    for module in (tools, base_tool):
        module.BaseTool = BaseTool
        module.Tool = Tool
        module.EnvVar = EnvVar
        module.tool = tool
    tools.base_tool = base_tool
    crewai.tools = tools
    sys.modules["crewai"] = crewai
    sys.modules["crewai.tools"] = tools
    sys.modules["crewai.tools.base_tool"] = base_tool


# --- Loading the project's tools -----------------------------------------------------------

def _import_module(spec):
    """The tool's module: imported by its dotted name (the project's `src/` is on sys.path), or,
    when that name is not importable and the spec names the file, loaded from the file."""
    name, module_file = spec["module"], spec.get("module_file")
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing_is_ours = error.name is not None and (
            name == error.name or name.startswith(error.name + ".")
        )
        if not (module_file and missing_is_ours):
            raise
    found = importlib.util.spec_from_file_location(name, module_file)
    if found is None or found.loader is None:
        raise ImportError("cannot import " + name + " from " + module_file)
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _is_tool_object(value):
    return hasattr(value, "name") and hasattr(value, "description") and (
        hasattr(value, "_run") or hasattr(value, "_arun") or hasattr(value, "func")
    )


def _build_tool(spec):
    module = _import_module(spec)
    try:
        found = getattr(module, spec["attr"])
    except AttributeError:
        raise AttributeError(
            "module '" + spec["module"] + "' has no attribute '" + spec["attr"] + "'"
        ) from None
    kwargs = spec.get("kwargs") or {}
    if inspect.isclass(found):
        if spec.get("is_function"):
            raise TypeError(
                spec["attr"] + " is a class, but it was named as a @tool function; "
                "name it as a tool class instead"
            )
        return found(**kwargs)
    if kwargs:
        raise TypeError(
            spec["attr"] + " is not a class, so it cannot take the arguments "
            + ", ".join(sorted(kwargs))
        )
    if _is_tool_object(found):
        return found
    if callable(found):
        # A plain function: wrap it the way @tool does.
        return importlib.import_module("crewai.tools").tool(found)
    raise TypeError(spec["attr"] + " is neither a tool class, a tool object nor a function")


def _load_tools(specs, shim_problem):
    loaded, failures = {}, []
    for spec in specs:
        try:
            loaded[spec["key"]] = _build_tool(spec)
        except BaseException as error:  # noqa: BLE001 -- a tool's import may raise anything
            text = _user_traceback(error)
            hint = _missing_module_hint(error, shim_problem)
            failures.append({
                "key": spec["key"],
                "module": spec["module"],
                "attr": spec["attr"],
                "error": text.rstrip("\n") + "\n" + hint if hint else text,
            })
    return loaded, failures


def _missing_module_hint(error, shim_problem):
    """What to do about a module that is not installed, said after Python's own error."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    top = error.name.split(".")[0]
    if top == "crewai" and shim_problem:
        return shim_problem
    if top in sys.modules or top == "crewai":
        return None  # a package that is there but lacks a submodule: Python's error says it
    return (
        "the module '" + top + "' is not installed for " + sys.executable + "; install it into "
        "the project's environment (`" + sys.executable + " -m pip install " + top + "`), or "
        "pass --python with the interpreter that has it"
    )


# --- Describing a tool ----------------------------------------------------------------------

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean",
               list: "array", dict: "object"}


def _signature_schema(function):
    properties, required = {}, []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "self" or parameter.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            continue
        json_type = _JSON_TYPES.get(getattr(parameter.annotation, "__origin__", parameter.annotation))
        properties[parameter.name] = {"type": json_type} if json_type else {}
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    return {"type": "object", "properties": properties, "required": required}


def _input_schema(tool):
    schema_model = getattr(tool, "args_schema", None)
    if schema_model is not None:
        try:
            if hasattr(schema_model, "model_json_schema"):
                schema = schema_model.model_json_schema()
            elif hasattr(schema_model, "schema"):
                schema = schema_model.schema()
            else:
                schema = None
        except Exception as error:  # noqa: BLE001 -- a field type pydantic cannot render
            sys.stderr.write(
                "crewai-rs worker: the args_schema of " + str(getattr(tool, "name", "?"))
                + " has no JSON schema (" + str(error) + "); using _run's signature instead\n"
            )
            schema = None
        if isinstance(schema, dict):
            schema.setdefault("type", "object")
            schema.setdefault("properties", {})
            return schema
    return _signature_schema(getattr(tool, "func", None) or _implementation(tool))


def _description(tool):
    text = str(getattr(tool, "description", "") or "")
    # CrewAI rewrites a tool's description as "Tool Name: ...\nTool Arguments: ...\nTool
    # Description: <the author's text>"; the schema travels separately here, so keep the text.
    marker = "\nTool Description: "
    if text.startswith("Tool Name: ") and marker in text:
        text = text.split(marker, 1)[1]
    return text


def _env_var(var):
    """One of the tool's `env_vars` (CrewAI's EnvVar, or the stand-in's) as JSON."""
    default = getattr(var, "default", None)
    return {
        "name": str(getattr(var, "name", "")),
        "description": str(getattr(var, "description", "")),
        "required": bool(getattr(var, "required", True)),
        "default": None if default is None else str(default),
    }


def _describe(key, tool):
    meta = {"crewai/resultAsAnswer": bool(getattr(tool, "result_as_answer", False))}
    limit = getattr(tool, "max_usage_count", None)
    if isinstance(limit, int):
        meta["crewai/maxUsageCount"] = limit
    env_vars = [_env_var(var) for var in (getattr(tool, "env_vars", None) or [])]
    if env_vars:
        meta["crewai/envVars"] = env_vars
    return {
        "name": key,
        "title": str(getattr(tool, "name", key)),
        "description": _description(tool),
        "inputSchema": _input_schema(tool),
        "_meta": meta,
    }


# --- Running a call -------------------------------------------------------------------------

def _validated_arguments(tool, arguments):
    schema_model = getattr(tool, "args_schema", None)
    if schema_model is not None and hasattr(schema_model, "model_validate"):
        return schema_model.model_validate(arguments).model_dump()
    return arguments


def _defines_run(tool):
    """Whether the tool's class has a `_run` of its own, not only BaseTool's placeholder."""
    for cls in type(tool).__mro__:
        if "_run" in cls.__dict__:
            return cls.__name__ != "BaseTool"
    return False


def _implementation(tool):
    """The function a call runs: `_run`, or `_arun` when only that is written, or `func`."""
    if hasattr(tool, "_arun") and not _defines_run(tool):
        return tool._arun
    if hasattr(tool, "_run"):
        return tool._run
    return tool.func


def _invoke(tool, arguments):
    result = _implementation(tool)(**arguments)
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    return result


def _as_text(result):
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    if hasattr(result, "model_dump_json"):
        return result.model_dump_json()
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)


def _is_machinery(filename):
    return (
        filename == __file__
        or filename.startswith("<frozen importlib")
        or filename == getattr(importlib, "__file__", None)
    )


def _user_traceback(error):
    """The traceback of a tool's exception without the worker's own frames."""
    report = traceback.TracebackException.from_exception(error)
    report.stack = traceback.StackSummary.from_list(
        [frame for frame in report.stack if not _is_machinery(frame.filename)]
    )
    return "".join(report.format())


def _text_result(text, is_error):
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class Server:
    def __init__(self, channel, tools):
        self.channel = channel
        self.tools = tools
        # Guarded by `lock`: the calls still running, and those of them the client gave up on.
        self.lock = threading.Lock()
        self.running = set()
        self.cancelled = set()

    def serve(self):
        for line in self.channel.messages():
            try:
                message = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as error:
                self.channel.error(None, PARSE_ERROR, "not JSON: " + str(error))
                continue
            if not isinstance(message, dict):
                self.channel.error(None, INVALID_REQUEST, "expected one JSON-RPC message object")
                continue
            try:
                self.dispatch(message)
            except Exception as error:  # noqa: BLE001 -- the worker must keep serving
                if message.get("id") is not None:
                    self.channel.error(message["id"], INTERNAL_ERROR, _user_traceback(error))

    def dispatch(self, message):
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        if method is None:
            return  # a response to a request we never send
        if request_id is None:
            if method == "notifications/cancelled":
                cancelled_id = params.get("requestId")
                with self.lock:
                    if cancelled_id in self.running:
                        self.cancelled.add(cancelled_id)
            return  # other notifications need no answer
        if method == "initialize":
            requested = params.get("protocolVersion")
            self.channel.result(request_id, {
                "protocolVersion": requested if requested in KNOWN_PROTOCOLS else LATEST_PROTOCOL,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "crewai-rs-python-tools", "version": "1"},
            })
        elif method == "ping":
            self.channel.result(request_id, {})
        elif method == "tools/list":
            self.channel.result(request_id, {
                "tools": [_describe(key, tool) for key, tool in self.tools.items()],
            })
        elif method == "tools/call":
            self.start_call(request_id, params)
        else:
            self.channel.error(request_id, METHOD_NOT_FOUND, "unknown method: " + str(method))

    def start_call(self, request_id, params):
        name = params.get("name")
        tool = self.tools.get(name)
        if tool is None:
            self.channel.error(request_id, INVALID_PARAMS, "unknown tool: " + str(name))
            return
        arguments = params.get("arguments") or {}
        with self.lock:
            self.running.add(request_id)
        # Each call runs on its own thread, so that a slow tool does not hold up pings, other
        # calls or cancellations.
        threading.Thread(
            target=self.run_call, args=(request_id, tool, arguments), daemon=True
        ).start()

    def run_call(self, request_id, tool, arguments):
        try:
            arguments = _validated_arguments(tool, arguments)
        except Exception as error:  # noqa: BLE001 -- pydantic's ValidationError, mostly
            self.answer(request_id, _text_result(
                "the arguments do not fit the tool's schema: " + str(error), True
            ))
            return
        try:
            result = _text_result(_as_text(_invoke(tool, arguments)), False)
        except BaseException as error:  # noqa: BLE001 -- the traceback goes back to the agent
            result = _text_result(_user_traceback(error), True)
        self.answer(request_id, result)

    def answer(self, request_id, result):
        with self.lock:
            self.running.discard(request_id)
            if request_id in self.cancelled:
                self.cancelled.discard(request_id)
                return  # the client gave up on it; it expects no answer
        self.channel.result(request_id, result)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: worker.py SPEC.json\n")
        return 2
    protocol_in, protocol_out = _take_protocol_channel()
    with open(sys.argv[1], encoding="utf-8") as spec_file:
        spec = json.load(spec_file)
    root = spec["project_root"]
    for path in (root, os.path.join(root, "src")):
        if path not in sys.path:
            sys.path.insert(0, path)
    shim_problem = None
    if not _crewai_importable():
        try:
            _install_crewai_shim()
        except ImportError as error:
            shim_problem = (
                "CrewAI is not installed for " + sys.executable + ", and the stand-in for "
                "crewai.tools that crewai-rs provides needs pydantic, which is not either ("
                + str(error) + "); install it with `" + sys.executable + " -m pip install "
                "pydantic`, or install crewai"
            )
    tools, failures = _load_tools(spec["tools"], shim_problem)
    if failures:
        with open(spec["load_report"], "w", encoding="utf-8") as report:
            json.dump(failures, report)
        for failure in failures:  # also for a restart, whose error shows only stderr
            sys.stderr.write(
                "crewai-rs worker: the tool " + failure["key"] + " (" + failure["attr"] + " in "
                + failure["module"] + ") could not be loaded:\n" + failure["error"] + "\n"
            )
        return LOAD_FAILED_EXIT
    Server(Channel(protocol_in, protocol_out), tools).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
