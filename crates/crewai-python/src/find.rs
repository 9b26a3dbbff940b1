//! [`find_python`]: which interpreter runs a project's tools.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::PythonError;

/// The interpreter for a project's Python tools: `explicit` (`--python PATH`) when given, else
/// the project's `.venv` (`<root>/.venv/bin/python`), else `python3` on `PATH`.
///
/// `needed_by` names the tools that need it, for the error when there is none.
pub fn find_python(
    explicit: Option<&Path>,
    project_root: &Path,
    needed_by: &[String],
) -> Result<PathBuf, PythonError> {
    find_python_on(
        explicit,
        project_root,
        needed_by,
        std::env::var_os("PATH").as_deref(),
    )
}

fn find_python_on(
    explicit: Option<&Path>,
    project_root: &Path,
    needed_by: &[String],
    path_var: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, PythonError> {
    if let Some(explicit) = explicit {
        if is_executable(explicit) {
            return Ok(explicit.to_path_buf());
        }
        // A bare name (`--python python3.12`) is looked up on PATH, as a shell would.
        let bare_name = explicit.parent() == Some(Path::new(""));
        if let Some(found) = explicit
            .to_str()
            .filter(|_| bare_name)
            .zip(path_var)
            .and_then(|(name, paths)| on_path(name, paths))
        {
            return Ok(found);
        }
        return Err(PythonError::ExplicitPythonUnusable {
            path: explicit.to_path_buf(),
            problem: if explicit.exists() {
                "it is not an executable file".into()
            } else if bare_name {
                "there is no such file, and no such program on PATH".into()
            } else {
                "there is no such file".into()
            },
        });
    }
    let venv = venv_python(project_root);
    if is_executable(&venv) {
        return Ok(venv);
    }
    if let Some(found) = path_var.and_then(|paths| on_path("python3", paths)) {
        return Ok(found);
    }
    Err(PythonError::NoPython {
        needed_by: needed_by.to_vec(),
        tried: vec![venv.display().to_string(), "python3 on PATH".to_string()],
    })
}

fn venv_python(project_root: &Path) -> PathBuf {
    if cfg!(windows) {
        project_root
            .join(".venv")
            .join("Scripts")
            .join("python.exe")
    } else {
        project_root.join(".venv").join("bin").join("python")
    }
}

fn on_path(program: &str, paths: &std::ffi::OsStr) -> Option<PathBuf> {
    let name = if cfg!(windows) && !program.ends_with(".exe") {
        OsString::from(format!("{program}.exe"))
    } else {
        OsString::from(program)
    };
    std::env::split_paths(paths)
        .map(|dir| dir.join(&name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    // Follows symlinks: a venv's `python` is one.
    let Ok(metadata) = std::fs::metadata(path) else {
        return false;
    };
    if !metadata.is_file() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        metadata.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        true
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn executable(path: &Path) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_explicit_python_wins_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let chosen = dir.path().join("my-python");
        executable(&chosen);
        executable(&dir.path().join(".venv/bin/python"));
        let found = find_python_on(Some(&chosen), dir.path(), &[], None).unwrap();
        assert_eq!(found, chosen);

        executable(&dir.path().join("bin/python3.12"));
        let bin = dir.path().join("bin");
        let by_name = find_python_on(
            Some(Path::new("python3.12")),
            dir.path(),
            &[],
            Some(bin.as_os_str()),
        );
        assert_eq!(by_name.unwrap(), bin.join("python3.12"));
        let error = find_python_on(
            Some(Path::new("python9")),
            dir.path(),
            &[],
            Some(bin.as_os_str()),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "--python python9: there is no such file, and no such program on PATH"
        );

        let missing = dir.path().join("nope");
        let error = find_python_on(Some(&missing), dir.path(), &[], None).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("--python {}: there is no such file", missing.display())
        );
    }

    #[test]
    fn the_project_venv_comes_before_path() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        executable(&bin.join("python3"));
        let venv = dir.path().join("project/.venv/bin/python");
        executable(&venv);
        let project = dir.path().join("project");
        let found = find_python_on(None, &project, &[], Some(bin.as_os_str())).unwrap();
        assert_eq!(found, venv);
        std::fs::remove_file(&venv).unwrap();
        let found = find_python_on(None, &project, &[], Some(bin.as_os_str())).unwrap();
        assert_eq!(found, bin.join("python3"));
    }

    #[test]
    fn no_python_names_the_tools_that_need_it() {
        let dir = tempfile::tempdir().unwrap();
        let needed = vec!["MyCustomTool".to_string(), "word_counter".to_string()];
        let error =
            find_python_on(None, dir.path(), &needed, Some(dir.path().as_os_str())).unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("the Python tools MyCustomTool, word_counter need a Python interpreter, and none was found"),
            "{text}"
        );
        assert!(text.contains(".venv/bin/python"), "{text}");
        assert!(text.contains("--python PATH"), "{text}");
    }
}
