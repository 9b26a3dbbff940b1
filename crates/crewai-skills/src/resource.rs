//! Reading one of a skill's files, never anything outside its folder.
//!
//! The path a model gives is refused before any file is touched when it is absolute or holds a
//! `..` (or a drive prefix); what is left is joined to the skill folder and canonicalised, and
//! the result must still be inside the folder, so a symbolic link that leads out is refused too.

use std::fs;
use std::io::Read;
use std::path::{Component, Path};

use crate::error::SkillError;
use crate::skill::Skill;

/// A resource's text, cut to the size asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceText {
    /// The relative path as given.
    pub path: String,
    pub text: String,
    /// The file's whole size in bytes.
    pub total_bytes: u64,
    /// Whether `text` is only the start of the file.
    pub truncated: bool,
}

impl Skill {
    /// Reads the file at `relative` (a `/`-separated path inside the skill folder, such as
    /// `references/guide.md`), at most `max_bytes` of it. Reads a file: call it off async worker
    /// threads.
    pub fn read_resource(
        &self,
        relative: &str,
        max_bytes: usize,
    ) -> Result<ResourceText, SkillError> {
        let refuse = |reason: &str| SkillError::Resource {
            skill: self.name().to_string(),
            requested: relative.to_string(),
            reason: reason.to_string(),
        };
        let Some(folder) = self.folder() else {
            return Err(refuse(
                "cannot be read: this skill was given inline and has no folder",
            ));
        };
        let requested = Path::new(relative);
        if relative.trim().is_empty() {
            return Err(refuse("is empty: give a path such as references/guide.md"));
        }
        for component in requested.components() {
            match component {
                Component::Normal(_) | Component::CurDir => {}
                Component::ParentDir => {
                    return Err(refuse(
                        "is refused: '..' may not appear in a resource path (give a path inside the skill folder)",
                    ));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(refuse(
                        "is refused: absolute paths are not allowed (give a path relative to the skill folder)",
                    ));
                }
            }
        }
        let joined = folder.join(requested);
        let real = fs::canonicalize(&joined).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => refuse(&format!(
                "does not exist; the skill's files are: {}",
                listing(self)
            )),
            _ => SkillError::ResourceIo {
                skill: self.name().to_string(),
                requested: relative.to_string(),
                source,
            },
        })?;
        if !real.starts_with(folder) {
            return Err(refuse(
                "is refused: it leads outside the skill folder (through a symbolic link)",
            ));
        }
        if !real.is_file() {
            return Err(refuse(&format!(
                "is not a file; the skill's files are: {}",
                listing(self)
            )));
        }
        let io_error = |source| SkillError::ResourceIo {
            skill: self.name().to_string(),
            requested: relative.to_string(),
            source,
        };
        let file = fs::File::open(&real).map_err(io_error)?;
        let total_bytes = file.metadata().map_err(io_error)?.len();
        let mut bytes = Vec::new();
        file.take(max_bytes as u64)
            .read_to_end(&mut bytes)
            .map_err(io_error)?;
        let truncated = total_bytes > bytes.len() as u64;
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            // A cut inside a multi-byte character: keep the valid start.
            Err(e) if truncated && e.utf8_error().error_len().is_none() => {
                let valid = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).map_err(|_| refuse("is not UTF-8 text"))?
            }
            Err(_) => {
                return Err(refuse(
                    "is not text (a binary file); run or copy it with a tool that handles files instead",
                ));
            }
        };
        Ok(ResourceText {
            path: relative.to_string(),
            text,
            total_bytes,
            truncated,
        })
    }
}

fn listing(skill: &Skill) -> String {
    let paths: Vec<String> = skill.resources().paths().collect();
    if paths.is_empty() {
        "none listed".to_string()
    } else {
        paths.join(", ")
    }
}
