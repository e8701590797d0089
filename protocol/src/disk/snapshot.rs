//! Snapshot files (`version-2/snapshot.<zxid hex>`): encoder and decoder.
//!
//! Layout: file header (`ZKSN`, version 2, dbid); session count, then (id, timeout) pairs;
//! the ACL cache (count, then index and ACL vector per entry); the nodes depth-first from the
//! root (whose path is the empty string), each as path, data, ACL index and persisted Stat;
//! the end marker path `"/"`; the Adler-32 of every byte so far and `"/"` again. A writer with
//! tree digests enabled appends a digest record (zxid, digest version, digest) and a second
//! checksum seal; the decoder accepts both forms.

use bytes::{BufMut, Bytes, BytesMut};

use super::{Adler32, FileHeader, StatPersisted, FORMAT_VERSION, SNAP_MAGIC};
use crate::{Acl, DecodeError, Jute, Reader};

/// The ACL index that means "world:anyone, all permissions" without a cache entry.
pub const OPEN_ACL_INDEX: i64 = -1;

/// Builds a snapshot in memory. Sessions and the ACL cache go to the head, nodes to the
/// body, in any interleaving (so ACL indexes can be assigned while walking the tree). The
/// body is kept in chunks of about [`BODY_CHUNK`] bytes, so adding a node never copies
/// what was written before (a server encodes nodes between requests).
pub struct SnapshotWriter {
    buf: BytesMut,
    chunks: Vec<Bytes>,
    body: BytesMut,
}

/// Size of one body chunk.
pub const BODY_CHUNK: usize = 1 << 20;

impl SnapshotWriter {
    /// Starts a snapshot with its file header.
    pub fn new(dbid: i64) -> SnapshotWriter {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        FileHeader {
            magic: SNAP_MAGIC,
            version: FORMAT_VERSION,
            dbid,
        }
        .write(&mut buf);
        SnapshotWriter {
            buf,
            chunks: Vec::new(),
            body: BytesMut::with_capacity(64 * 1024),
        }
    }

    /// Sessions and their timeouts (ms). Once, before the ACL cache.
    pub fn sessions(&mut self, sessions: &[(i64, i32)]) {
        self.buf.put_i32(sessions.len() as i32);
        for (id, timeout) in sessions {
            self.buf.put_i64(*id);
            self.buf.put_i32(*timeout);
        }
    }

    /// The ACL cache: every index a node refers to (except [`OPEN_ACL_INDEX`]). Once.
    pub fn acl_cache<'a>(&mut self, entries: impl ExactSizeIterator<Item = (i64, &'a [Acl])>) {
        self.buf.put_i32(entries.len() as i32);
        for (index, acl) in entries {
            self.buf.put_i64(index);
            self.buf.put_i32(acl.len() as i32);
            for a in acl {
                a.write(&mut self.buf);
            }
        }
    }

    /// One node; parents must come before their children, the root first with path `""`.
    pub fn node(&mut self, path: &str, data: Option<&[u8]>, acl: i64, stat: &StatPersisted) {
        if self.body.len() >= BODY_CHUNK {
            let full = std::mem::replace(&mut self.body, BytesMut::with_capacity(BODY_CHUNK * 2));
            self.chunks.push(full.freeze());
        }
        crate::jute::write_bytes(&mut self.body, path.as_bytes());
        match data {
            Some(d) => crate::jute::write_bytes(&mut self.body, d),
            None => self.body.put_i32(-1),
        }
        self.body.put_i64(acl);
        stat.write(&mut self.body);
    }

    /// Writes the end marker and the checksum seal; returns the file's bytes.
    pub fn finish(mut self) -> Bytes {
        let body: usize = self.chunks.iter().map(Bytes::len).sum::<usize>() + self.body.len();
        self.buf.reserve(body + 32);
        for chunk in self.chunks.drain(..) {
            self.buf.extend_from_slice(&chunk);
        }
        self.buf.extend_from_slice(&self.body);
        drop(self.body);
        crate::jute::write_bytes(&mut self.buf, b"/");
        let sum = Adler32::of(&self.buf);
        self.buf.put_i64(i64::from(sum));
        crate::jute::write_bytes(&mut self.buf, b"/");
        self.buf.freeze()
    }
}

/// One node read from a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapNode {
    /// Full path; the root is `""` as stored.
    pub path: String,
    pub data: Option<Bytes>,
    pub acl: i64,
    pub stat: StatPersisted,
}

/// The digest record some writers append after the first seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZxidDigest {
    pub zxid: i64,
    pub version: i32,
    pub digest: i64,
}

/// A whole snapshot, decoded.
#[derive(Debug, Clone, Default)]
pub struct SnapshotImage {
    pub dbid: i64,
    pub sessions: Vec<(i64, i32)>,
    pub acls: Vec<(i64, Vec<Acl>)>,
    /// Parents before children, root first.
    pub nodes: Vec<SnapNode>,
    pub digest: Option<ZxidDigest>,
}

/// Why a snapshot could not be read, and the byte offset where that was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at offset {offset}")]
pub struct SnapshotError {
    pub offset: usize,
    pub reason: String,
}

/// Decodes a snapshot file's bytes, verifying the header, the structure and the checksum.
pub fn read_snapshot(bytes: Bytes) -> Result<SnapshotImage, SnapshotError> {
    let total = bytes.len();
    let mut r = Reader::new(bytes.clone());
    let at = |r: &Reader| total - r.remaining();
    let fail = |r: &Reader, reason: String| SnapshotError {
        offset: total - r.remaining(),
        reason,
    };
    let trunc = |r: &Reader, e: DecodeError| fail(r, format!("malformed snapshot ({e})"));

    let header = FileHeader::read(&mut r).map_err(|e| trunc(&r, e))?;
    if header.magic != SNAP_MAGIC {
        return Err(SnapshotError {
            offset: 0,
            reason: format!(
                "not a snapshot file (magic 0x{:08x}, expected 0x{:08x} \"ZKSN\")",
                header.magic, SNAP_MAGIC
            ),
        });
    }
    if header.version != FORMAT_VERSION {
        return Err(SnapshotError {
            offset: 4,
            reason: format!("unsupported snapshot version {}", header.version),
        });
    }
    let mut image = SnapshotImage {
        dbid: header.dbid,
        ..Default::default()
    };

    let count = r.i32().map_err(|e| trunc(&r, e))?;
    if count < 0 || count as usize > r.remaining() / 12 {
        return Err(fail(&r, format!("invalid session count {count}")));
    }
    image.sessions.reserve(count as usize);
    for _ in 0..count {
        let id = r.i64().map_err(|e| trunc(&r, e))?;
        let timeout = r.i32().map_err(|e| trunc(&r, e))?;
        image.sessions.push((id, timeout));
    }

    let count = r.i32().map_err(|e| trunc(&r, e))?;
    if count < 0 || count as usize > r.remaining() / 12 {
        return Err(fail(&r, format!("invalid ACL cache size {count}")));
    }
    for _ in 0..count {
        let index = r.i64().map_err(|e| trunc(&r, e))?;
        let acl = match r.vec_len().map_err(|e| trunc(&r, e))? {
            None => return Err(fail(&r, "ACL cache entry without a list".into())),
            Some(n) => {
                let mut list = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    list.push(Acl::read(&mut r).map_err(|e| trunc(&r, e))?);
                }
                list
            }
        };
        image.acls.push((index, acl));
    }

    let mut known: std::collections::HashSet<String> = std::collections::HashSet::new();
    loop {
        let start = at(&r);
        let path = r
            .ustring()
            .map_err(|e| trunc(&r, e))?
            .ok_or_else(|| fail(&r, "null node path".into()))?;
        if path == "/" {
            break;
        }
        let data = r.buffer().map_err(|e| trunc(&r, e))?;
        let acl = r.i64().map_err(|e| trunc(&r, e))?;
        let stat = StatPersisted::read(&mut r).map_err(|e| trunc(&r, e))?;
        match path.rfind('/') {
            None if image.nodes.is_empty() && path.is_empty() => {}
            None => {
                return Err(SnapshotError {
                    offset: start,
                    reason: format!("node path {path:?} is not absolute"),
                })
            }
            Some(i) => {
                let parent = &path[..i];
                if !known.contains(parent) {
                    return Err(SnapshotError {
                        offset: start,
                        reason: format!("node {path:?} comes before its parent"),
                    });
                }
            }
        }
        if !known.insert(path.clone()) {
            return Err(SnapshotError {
                offset: start,
                reason: format!("node {path:?} appears twice"),
            });
        }
        image.nodes.push(SnapNode {
            path,
            data,
            acl,
            stat,
        });
    }
    if image.nodes.is_empty() {
        return Err(fail(&r, "snapshot holds no root node".into()));
    }

    check_seal(&bytes, &mut r, total)?;

    // Optional digest record with its own seal. Anything else after the seal is an error:
    // a file is either complete or damaged.
    if !r.is_empty() {
        let zxid = r.i64().map_err(|e| trunc(&r, e))?;
        let version = r.i32().map_err(|e| trunc(&r, e))?;
        let digest = if version < 2 {
            let s = r.ustring().map_err(|e| trunc(&r, e))?.unwrap_or_default();
            i64::from_str_radix(&s, 16).unwrap_or(0)
        } else {
            r.i64().map_err(|e| trunc(&r, e))?
        };
        check_seal(&bytes, &mut r, total)?;
        image.digest = Some(ZxidDigest {
            zxid,
            version,
            digest,
        });
    }
    if !r.is_empty() {
        return Err(fail(
            &r,
            format!("{} unexpected bytes after the end", r.remaining()),
        ));
    }
    Ok(image)
}

/// Reads a checksum seal (checksum of every byte before it, then the path `"/"`).
fn check_seal(bytes: &[u8], r: &mut Reader, total: usize) -> Result<(), SnapshotError> {
    let offset = total - r.remaining();
    let expected = i64::from(Adler32::of(&bytes[..offset]));
    let fail = |reason: String| SnapshotError { offset, reason };
    let stored = r
        .i64()
        .map_err(|_| fail("snapshot ends before its checksum".into()))?;
    let marker = r
        .ustring()
        .map_err(|_| fail("snapshot ends inside its checksum seal".into()))?;
    if stored != expected {
        return Err(fail(format!(
            "checksum mismatch (stored 0x{stored:x}, computed 0x{expected:x})"
        )));
    }
    if marker.as_deref() != Some("/") {
        return Err(fail("missing end marker after the checksum".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Bytes {
        let mut w = SnapshotWriter::new(-1);
        w.sessions(&[(0x100, 30000)]);
        let acl = [Acl::new(31, "digest", "u:h")];
        w.acl_cache([(1i64, &acl[..])].into_iter());
        let stat = StatPersisted::default();
        w.node("", Some(b""), OPEN_ACL_INDEX, &stat);
        w.node("/a", Some(b"x"), 1, &stat);
        w.node("/a/b", None, OPEN_ACL_INDEX, &stat);
        w.finish()
    }

    #[test]
    fn round_trip() {
        let image = read_snapshot(sample()).expect("reads");
        assert_eq!(image.dbid, -1);
        assert_eq!(image.sessions, vec![(0x100, 30000)]);
        assert_eq!(image.acls.len(), 1);
        let paths: Vec<&str> = image.nodes.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(paths, ["", "/a", "/a/b"]);
        assert_eq!(image.nodes[2].data, None);
        assert!(image.digest.is_none());
    }

    #[test]
    fn a_body_of_several_chunks_reads_back_in_order() {
        let mut w = SnapshotWriter::new(-1);
        w.sessions(&[]);
        let stat = StatPersisted::default();
        w.node("", Some(b""), OPEN_ACL_INDEX, &stat);
        let data = [7u8; 1000];
        let n = 3 * BODY_CHUNK / 1000;
        for i in 0..n {
            w.node(&format!("/n{i:07}"), Some(&data), OPEN_ACL_INDEX, &stat);
        }
        w.acl_cache(std::iter::empty());
        let bytes = w.finish();
        assert!(bytes.len() > 3 * BODY_CHUNK);
        let image = read_snapshot(bytes).expect("reads");
        assert_eq!(image.nodes.len(), n + 1);
        assert!(image.nodes[1..]
            .iter()
            .enumerate()
            .all(|(i, node)| node.path == format!("/n{i:07}")));
    }

    #[test]
    fn every_flipped_byte_or_truncation_is_detected() {
        let good = sample();
        for i in 0..good.len() {
            let mut bad = good.to_vec();
            bad[i] ^= 0x40;
            assert!(
                read_snapshot(Bytes::from(bad)).is_err(),
                "flip at {i} not detected"
            );
            assert!(read_snapshot(good.slice(..i)).is_err(), "cut at {i}");
        }
    }

    #[test]
    fn the_error_names_the_offset() {
        let good = sample();
        let mut bad = good.to_vec();
        let n = bad.len();
        bad[n - 10] ^= 1; // inside the stored checksum
        let err = read_snapshot(Bytes::from(bad)).expect_err("corrupt");
        assert_eq!(err.offset, n - 13);
        assert!(err.reason.contains("checksum"), "{err}");
    }
}
