//! Reading the files an operator names (certificates, keys, user lists, fixtures, data
//! files) defensively: only regular files are opened (a FIFO would block, a device such as
//! `/dev/zero` never ends), and small files are read with a size cap checked before reading.

use std::fs::{self, File};
use std::io::Read;
use std::path::Path;

/// The most a certificate, key, CA bundle, user list or JAAS file may hold.
pub const SMALL_FILE_CAP: u64 = 1 << 20;

/// The most a JSON fixture (`--seed`) may hold.
pub const FIXTURE_CAP: u64 = 256 << 20;

fn kind(m: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading, refusing anything but a regular file (checked before opening,
/// so a FIFO is never opened, and again on the open file). Returns the file and its length.
pub fn open_regular(path: &Path) -> Result<(File, u64), String> {
    let refuse = |m: &fs::Metadata| {
        format!(
            "{} is {}, not a regular file; refusing to read it",
            path.display(),
            kind(m)
        )
    };
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let meta = fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() {
        return Err(refuse(&meta));
    }
    let file = File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(refuse(&meta));
    }
    Ok((file, meta.len()))
}

/// Reads a regular file of at most `cap` bytes whole.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    let (file, len) = open_regular(path)?;
    if len > cap {
        return Err(format!(
            "{} is {len} bytes, more than the {cap} bytes such a file may hold; refusing to \
             read it",
            path.display()
        ));
    }
    let mut out = Vec::with_capacity(len as usize);
    // The file may grow while it is read: never take more than the cap.
    file.take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if out.len() as u64 > cap {
        return Err(format!(
            "{} holds more than the {cap} bytes such a file may hold; refusing to read it",
            path.display()
        ));
    }
    Ok(out)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_capped_text(path: &Path, cap: u64) -> Result<String, String> {
    String::from_utf8(read_capped(path, cap)?)
        .map_err(|e| format!("{} is not UTF-8 text: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_regular_and_oversized_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("zkd-files-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let err = read_capped(&dir, 10).expect_err("a directory");
        assert!(err.contains("is a directory"), "{err}");
        let err = read_capped(Path::new("/dev/zero"), 10).expect_err("a device");
        assert!(err.contains("is a device"), "{err}");
        let f = dir.join("big");
        fs::write(&f, [b'x'; 11]).expect("write");
        let err = read_capped(&f, 10).expect_err("too big");
        assert!(err.contains("11 bytes"), "{err}");
        assert_eq!(read_capped(&f, 11).expect("fits").len(), 11);
        let _ = fs::remove_dir_all(&dir);
    }
}
