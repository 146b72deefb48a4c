//! Opening a path beneath the root without following symlinks out of it:
//! the check and the open are one step, so a symlink swapped in between
//! cannot lead the open elsewhere.

use std::fs::File;
use std::path::{Component, Path};

/// What an open does with a symlink on its way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    /// Follows a symlink whose target stays beneath the root (on Linux;
    /// elsewhere, and where `openat2` is missing, none is followed).
    Inside,
    /// Follows none.
    Never,
}

/// Why an open failed.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The path leads out of the root, or through a symlink not followed.
    Outside,
    /// The open itself failed.
    Io(std::io::Error),
}

/// Opens `rel` (relative to the root, lexically normal: no `..`) for
/// reading, beneath the root directory `dir`. Never blocks on a FIFO.
#[cfg(unix)]
pub(crate) fn open_beneath(dir: &File, rel: &Path, links: Links) -> Result<File, OpenError> {
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(OpenError::Outside);
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{Mode, ResolveFlags, openat2};
        use rustix::io::Errno;
        let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        if links == Links::Never {
            resolve |= ResolveFlags::NO_SYMLINKS;
        }
        let path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        // EAGAIN: a rename raced the lookup; the kernel asks to retry.
        for _ in 0..8 {
            match openat2(dir, path, flags(), Mode::empty(), resolve) {
                Ok(fd) => return Ok(File::from(fd)),
                Err(Errno::AGAIN | Errno::INTR) => {}
                // No openat2 (before Linux 5.6, or filtered): walk instead.
                Err(Errno::NOSYS | Errno::PERM) => return walk(dir, rel),
                Err(Errno::XDEV | Errno::LOOP) => return Err(OpenError::Outside),
                Err(e) => return Err(OpenError::Io(e.into())),
            }
        }
        Err(OpenError::Io(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "the directory kept changing while it was opened",
        )))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = links;
        walk(dir, rel)
    }
}

/// Read-only, close-on-exec, no controlling terminal, and non-blocking (a
/// FIFO swapped in must not hold the thread).
#[cfg(unix)]
fn flags() -> rustix::fs::OFlags {
    use rustix::fs::OFlags;
    OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK
}

/// One component at a time from the root's descriptor, never following a
/// symlink: the portable way to stay beneath the root.
#[cfg(unix)]
fn walk(dir: &File, rel: &Path) -> Result<File, OpenError> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, openat, statat};
    use rustix::io::Errno;
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let io = |e: Errno| OpenError::Io(e.into());
    let mut at = openat(dir, ".", flags() | OFlags::DIRECTORY, Mode::empty()).map_err(io)?;
    for (i, name) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut flags = flags() | OFlags::NOFOLLOW;
        if !last {
            flags |= OFlags::DIRECTORY;
        }
        at = match openat(&at, *name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(OpenError::Outside),
            Err(Errno::NOTDIR) => {
                let link = statat(&at, *name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
                return Err(if link {
                    OpenError::Outside
                } else {
                    io(Errno::NOTDIR)
                });
            }
            Err(e) => return Err(io(e)),
        };
    }
    Ok(File::from(at))
}

/// Without descriptors to walk from (not Unix): the path, after the
/// root's checks, with no symlink at its end.
#[cfg(not(unix))]
pub(crate) fn open_beneath(dir: &Path, rel: &Path, _links: Links) -> Result<File, OpenError> {
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(OpenError::Outside);
    }
    let path = dir.join(rel);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(OpenError::Outside),
        _ => File::open(&path).map_err(OpenError::Io),
    }
}
