//! matplotlib's data folder for the WASI guest. The interpreter's matplotlib lives in the zipped
//! standard library, with its data (`matplotlibrc`, fonts, styles) as a nested
//! `matplotlib/mpl-data.zip`; matplotlib opens those as plain files in `mpl-data/` beside its
//! `__file__`, which inside a zip cannot exist. So the data is unpacked once per machine next
//! to the compiled interpreter, given to the guest read-only at [`GUEST_MPL_DATA`], and the
//! prelude points matplotlib's `__file__` beside it ([`MPL_FILE_VAR`]).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::SandboxError;

/// Where the guest sees the unpacked data (read-only).
pub(crate) const GUEST_MPL_DATA: &str = "/usr/local/share/matplotlib/mpl-data";
/// The variable through which the prelude learns the `__file__` to give matplotlib (its data
/// folder is `mpl-data` beside it); the prelude removes it before the code runs.
pub(crate) const MPL_FILE_VAR: &str = "_CREWAI_MATPLOTLIB_FILE";
/// The `__file__` matplotlib gets: [`GUEST_MPL_DATA`]'s sibling.
pub(crate) const GUEST_MPL_FILE: &str = "/usr/local/share/matplotlib/__init__.pyc";
/// The nested archive inside the standard library zip.
const NESTED_ARCHIVE: &str = "matplotlib/mpl-data.zip";

/// The unpacked data folder in `cache_dir`, unpacking it on the first call; none when this
/// interpreter has no matplotlib data. Unpacked into a temporary folder first and renamed, so
/// a folder under the final name is always complete.
pub(crate) fn unpacked(
    stdlib_zip: &Path,
    cache_dir: &Path,
) -> Result<Option<PathBuf>, SandboxError> {
    let target = cache_dir.join("mpl-data");
    if target.is_dir() {
        return Ok(Some(target));
    }
    let file = std::fs::File::open(stdlib_zip).map_err(SandboxError::io("read", stdlib_zip))?;
    let bad_zip = |source: zip::result::ZipError| SandboxError::Io {
        action: "read",
        path: stdlib_zip.to_path_buf(),
        source: std::io::Error::other(source),
    };
    let mut stdlib = zip::ZipArchive::new(file).map_err(bad_zip)?;
    let mut nested = Vec::new();
    match stdlib.by_name(NESTED_ARCHIVE) {
        Ok(mut entry) => entry
            .read_to_end(&mut nested)
            .map_err(SandboxError::io("read", stdlib_zip))?,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(error) => return Err(bad_zip(error)),
    };
    let staging = tempfile::Builder::new()
        .prefix(".mpl-data-")
        .tempdir_in(cache_dir)
        .map_err(SandboxError::io("create a folder in", cache_dir))?;
    // `extract` keeps every entry inside the folder it is given (it refuses `..` and absolute
    // names), so the nested archive cannot write elsewhere.
    zip::ZipArchive::new(std::io::Cursor::new(nested))
        .and_then(|mut archive| archive.extract(staging.path()))
        .map_err(bad_zip)?;
    let staged = staging.keep();
    if let Err(source) = std::fs::rename(&staged, &target) {
        let _ = std::fs::remove_dir_all(&staged);
        // Another process unpacked it first.
        if !target.is_dir() {
            return Err(SandboxError::Io {
                action: "create",
                path: target,
                source,
            });
        }
    }
    Ok(Some(target))
}
