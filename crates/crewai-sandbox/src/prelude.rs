//! What every backend runs: the Python prelude around the model's code, and the folders and
//! variables the code sees inside a sandbox.

/// The code's working (scratch) folder inside a sandbox: the only writable place besides
/// [`SANDBOX_TMP`].
pub(crate) const SANDBOX_SCRATCH: &str = "/scratch";
pub(crate) const SANDBOX_TMP: &str = "/tmp";
/// Granted input files, read-only, under their file names.
pub(crate) const SANDBOX_INPUTS: &str = "/inputs";

/// Runs the model's code as `__main__` in the working folder, after checking that the modules it
/// says it needs are importable: a missing one is a clear `ModuleNotFoundError`, not a silent
/// pass. Every backend runs it: its arguments are the working folder, the code, the needed
/// modules (comma-separated) and what to say about a missing one. When the backend names a
/// `__file__` for matplotlib (the WASI one, see `mpl_data`), matplotlib is found as usual and
/// given that `__file__`, so that it reads its data from the folder beside it.
pub(crate) const PRELUDE: &str = r#"import os, sys, importlib.util
_workdir, _source, _needed, _hint = sys.argv[1], sys.argv[2], [n for n in sys.argv[3].split(",") if n], sys.argv[4]
del sys.argv[1:]
_matplotlib_file = os.environ.pop("_CREWAI_MATPLOTLIB_FILE", None)
if _matplotlib_file:
    class _MatplotlibBesideItsData:
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name != "matplotlib":
                return None
            for finder in sys.meta_path[sys.meta_path.index(cls) + 1:]:
                spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
                if spec is not None:
                    spec.origin = _matplotlib_file
                    return spec
            return None
    sys.meta_path.insert(0, _MatplotlibBesideItsData)
os.chdir(_workdir)
_missing = [n for n in _needed if importlib.util.find_spec(n.split(".")[0]) is None]
if _missing:
    raise ModuleNotFoundError("not available in the sandbox: " + ", ".join(_missing) + "; " + _hint)
del _missing, _needed, _hint, _workdir
exec(compile(_source, "<code>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
"#;

/// The interpreter's arguments after its own flags: the prelude and its four arguments.
pub(crate) fn prelude_args<'a>(
    workdir: &'a str,
    code: &'a str,
    modules: &'a str,
    missing_hint: &'a str,
) -> [&'a str; 6] {
    ["-c", PRELUDE, workdir, code, modules, missing_hint]
}

/// The variables every backend sets (the caller's allow-list comes on top): a home and a
/// temporary folder inside what the code may write, unbuffered output, and matplotlib drawing
/// to files.
pub(crate) fn base_env(home: &str, tmp: &str) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", home.to_string()),
        ("TMPDIR", tmp.to_string()),
        ("PYTHONUNBUFFERED", "1".into()),
        ("MPLBACKEND", "Agg".into()),
        ("MPLCONFIGDIR", tmp.to_string()),
    ]
}
