//! Snapshot files (`version-2/snapshot.<zxid hex>`): encoder and decoder.
//!
//! Layout: file header (`ZKSN`, version 2, dbid); session count, then (id, timeout) pairs;
//! the ACL cache (count, then index and ACL vector per entry); the nodes depth-first from the
//! root (whose path is the empty string), each as path, data, ACL index and persisted Stat;
//! the end marker path `"/"`; the Adler-32 of every byte so far and `"/"` again. A writer with
//! tree digests enabled appends a digest record (zxid, digest version, digest) and a second
//! checksum seal; ZooKeeper 3.9 then appends the last processed zxid and a third seal. The
//! decoder accepts every one of these forms.

use bytes::{BufMut, Bytes, BytesMut};

use super::{Adler32, FileHeader, StatPersisted, FORMAT_VERSION, SNAP_MAGIC};
use crate::{Acl, Jute};

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
    /// The last processed zxid ZooKeeper 3.9 records after the digest (with a seal of its
    /// own); zkd's start takes the snapshot's zxid from its name, as 3.8 does.
    pub last_processed_zxid: Option<i64>,
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
    let size = bytes.len() as u64;
    read_snapshot_from(&bytes[..], size)
}

/// A snapshot being read incrementally: every length is checked against what the file
/// still holds before anything is allocated, and the checksum is summed as bytes pass.
struct Input<R> {
    r: R,
    pos: u64,
    size: u64,
    sum: Adler32,
    /// The longest buffer or string accepted (ZooKeeper's reader refuses longer ones).
    max_len: u64,
}

impl<R: std::io::Read> Input<R> {
    fn fail(&self, reason: String) -> SnapshotError {
        SnapshotError {
            offset: self.pos as usize,
            reason,
        }
    }

    fn left(&self) -> u64 {
        self.size - self.pos
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), SnapshotError> {
        if buf.len() as u64 > self.left() {
            return Err(self.fail(format!(
                "malformed snapshot (needs {} more bytes, the file holds {})",
                buf.len(),
                self.left()
            )));
        }
        self.r
            .read_exact(buf)
            .map_err(|e| self.fail(format!("read failed: {e}")))?;
        self.sum.update(buf);
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn i32(&mut self) -> Result<i32, SnapshotError> {
        let mut b = [0u8; 4];
        self.fill(&mut b)?;
        Ok(i32::from_be_bytes(b))
    }

    fn i64(&mut self) -> Result<i64, SnapshotError> {
        let mut b = [0u8; 8];
        self.fill(&mut b)?;
        Ok(i64::from_be_bytes(b))
    }

    /// A length-prefixed buffer (`None` for -1), no longer than what the file holds.
    fn buffer(&mut self) -> Result<Option<Vec<u8>>, SnapshotError> {
        let len = self.i32()?;
        match len {
            -1 => Ok(None),
            n if n < -1 || n as u64 > self.left() => Err(self.fail(format!(
                "malformed snapshot (invalid length {n}, {} bytes left in the file)",
                self.left()
            ))),
            n if n as u64 > self.max_len => Err(self.fail(format!(
                "malformed snapshot (length {n} is over the limit of {} bytes; a larger \
                 jute.maxbuffer raises it)",
                self.max_len
            ))),
            n => {
                let mut v = vec![0u8; n as usize];
                self.fill(&mut v)?;
                Ok(Some(v))
            }
        }
    }

    /// A length-prefixed string, decoded leniently (invalid UTF-8 is replaced).
    fn string(&mut self) -> Result<Option<String>, SnapshotError> {
        Ok(self.buffer()?.map(|b| match String::from_utf8(b) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }))
    }

    /// A count of elements taking at least `each` bytes; refused when the file cannot hold
    /// them.
    fn count(&mut self, each: u64, what: &str) -> Result<usize, SnapshotError> {
        let n = self.i32()?;
        if n < 0 || n as u64 > self.left() / each {
            return Err(self.fail(format!("invalid {what} {n}")));
        }
        Ok(n as usize)
    }

    fn stat(&mut self) -> Result<StatPersisted, SnapshotError> {
        Ok(StatPersisted {
            czxid: self.i64()?,
            mzxid: self.i64()?,
            ctime: self.i64()?,
            mtime: self.i64()?,
            version: self.i32()?,
            cversion: self.i32()?,
            aversion: self.i32()?,
            ephemeral_owner: self.i64()?,
            pzxid: self.i64()?,
        })
    }

    fn acl(&mut self) -> Result<Acl, SnapshotError> {
        let at = self.pos;
        let perms = self.i32()?;
        let scheme = self.string()?.unwrap_or_default();
        if scheme.is_empty() {
            // No writer stores one (every ACL names its scheme): zeros where ACLs should be.
            return Err(SnapshotError {
                offset: at as usize,
                reason: "ACL entry without a scheme".into(),
            });
        }
        let id = self.string()?.unwrap_or_default();
        Ok(Acl::new(perms, &scheme, &id))
    }

    /// Reads a checksum seal (checksum of every byte before it, then the path `"/"`).
    fn seal(&mut self) -> Result<(), SnapshotError> {
        let offset = self.pos as usize;
        let expected = i64::from(self.sum.value());
        let fail = |reason: String| SnapshotError { offset, reason };
        let stored = self
            .i64()
            .map_err(|_| fail("snapshot ends before its checksum".into()))?;
        let marker = self
            .string()
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
}

/// Decodes a snapshot of `size` bytes from `r` incrementally (a file is never read whole
/// into memory; a length larger than what the file holds is refused before anything is
/// allocated), verifying the header, the structure and the checksum. Buffers longer than
/// ZooKeeper's reader accepts with the default `jute.maxbuffer` are refused.
pub fn read_snapshot_from<R: std::io::Read>(
    r: R,
    size: u64,
) -> Result<SnapshotImage, SnapshotError> {
    let limit = super::txnlog::max_entry_len(super::txnlog::DEFAULT_JUTE_MAXBUFFER);
    read_snapshot_limited(r, size, limit)
}

/// [`read_snapshot_from`], refusing a buffer or string longer than `max_len` bytes. Memory
/// grows only with what the file really holds: no count is trusted for an allocation beyond
/// a small start, and what no writer leaves — a session listed twice, an ACL cache index
/// listed twice, an ACL without a scheme, a node twice — is refused where it is found, so a
/// sparse or zero-filled file is refused within its first zeros.
pub fn read_snapshot_limited<R: std::io::Read>(
    r: R,
    size: u64,
    max_len: u64,
) -> Result<SnapshotImage, SnapshotError> {
    let mut r = Input {
        r,
        pos: 0,
        size,
        sum: Adler32::new(),
        max_len,
    };
    let magic = r.i32()?;
    if magic != SNAP_MAGIC {
        return Err(SnapshotError {
            offset: 0,
            reason: format!(
                "not a snapshot file (magic 0x{magic:08x}, expected 0x{SNAP_MAGIC:08x} \"ZKSN\")"
            ),
        });
    }
    let version = r.i32()?;
    if version != FORMAT_VERSION {
        return Err(SnapshotError {
            offset: 4,
            reason: format!("unsupported snapshot version {version}"),
        });
    }
    // A complete snapshot ends with its seal: the end marker `"/"` (length 1, then '/').
    if size < 16 + 4 + 4 + 4 + 8 + 5 {
        return Err(r.fail(format!("file too short for a snapshot ({size} bytes)")));
    }
    let mut image = SnapshotImage {
        dbid: r.i64()?,
        ..Default::default()
    };

    /// Elements reserved ahead of reading them; beyond this the vectors grow as they are read.
    const RESERVE: usize = 1 << 12;
    let count = r.count(12, "session count")?;
    image.sessions.reserve(count.min(RESERVE));
    let mut ids = std::collections::HashSet::with_capacity(count.min(RESERVE));
    for _ in 0..count {
        let at = r.pos as usize;
        let id = r.i64()?;
        let timeout = r.i32()?;
        if !ids.insert(id) {
            return Err(SnapshotError {
                offset: at,
                reason: format!("session 0x{id:x} listed twice"),
            });
        }
        image.sessions.push((id, timeout));
    }
    drop(ids);

    let count = r.count(12, "ACL cache size")?;
    let mut indexes = std::collections::HashSet::with_capacity(count.min(RESERVE));
    for _ in 0..count {
        let at = r.pos as usize;
        let index = r.i64()?;
        if !indexes.insert(index) {
            return Err(SnapshotError {
                offset: at,
                reason: format!("ACL cache index {index} listed twice"),
            });
        }
        let n = r.i32()?;
        if n < 0 || n as u64 > r.left() / 12 {
            return Err(r.fail(if n == -1 {
                "ACL cache entry without a list".into()
            } else {
                format!("invalid ACL list length {n}")
            }));
        }
        let mut list = Vec::with_capacity((n as usize).min(64));
        for _ in 0..n {
            list.push(r.acl()?);
        }
        image.acls.push((index, list));
    }

    let mut known: std::collections::HashSet<String> = std::collections::HashSet::new();
    loop {
        let start = r.pos as usize;
        let path = r.string()?.ok_or_else(|| r.fail("null node path".into()))?;
        if path == "/" {
            break;
        }
        let data = r.buffer()?.map(Bytes::from);
        let acl = r.i64()?;
        let stat = r.stat()?;
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
        return Err(r.fail("snapshot holds no root node".into()));
    }

    r.seal()?;

    // Optional digest record with its own seal, then (ZooKeeper 3.9) an optional record of the
    // last processed zxid with its own seal: 8 bytes, then the 13-byte seal. Anything else
    // after the seals is an error: a file is either complete or damaged.
    const LAST_ZXID_RECORD: u64 = 8 + 8 + 4 + 1;
    if r.left() > 0 && r.left() != LAST_ZXID_RECORD {
        let zxid = r.i64()?;
        let version = r.i32()?;
        let digest = if version < 2 {
            let s = r.string()?.unwrap_or_default();
            i64::from_str_radix(&s, 16).unwrap_or(0)
        } else {
            r.i64()?
        };
        r.seal()?;
        image.digest = Some(ZxidDigest {
            zxid,
            version,
            digest,
        });
    }
    if r.left() == LAST_ZXID_RECORD {
        let zxid = r.i64()?;
        r.seal()?;
        image.last_processed_zxid = Some(zxid);
    }
    if r.left() > 0 {
        return Err(r.fail(format!("{} unexpected bytes after the end", r.left())));
    }
    Ok(image)
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

    /// Appends `record` and a checksum seal over everything before it, as ZooKeeper does.
    fn sealed(bytes: Bytes, record: &[u8]) -> Bytes {
        let mut buf = BytesMut::from(&bytes[..]);
        buf.extend_from_slice(record);
        let sum = Adler32::of(&buf);
        buf.put_i64(i64::from(sum));
        crate::jute::write_bytes(&mut buf, b"/");
        buf.freeze()
    }

    #[test]
    fn digest_and_last_processed_zxid_records_are_read() {
        let mut digest = BytesMut::new();
        digest.put_i64(7);
        digest.put_i32(2);
        digest.put_i64(0x1234);
        let last = 9i64.to_be_bytes();
        // 3.9 with digests on: digest record, then the last processed zxid.
        let image = read_snapshot(sealed(sealed(sample(), &digest), &last)).expect("reads");
        assert_eq!(image.digest.map(|d| (d.zxid, d.digest)), Some((7, 0x1234)));
        assert_eq!(image.last_processed_zxid, Some(9));
        // 3.9 with digests off: the last processed zxid alone.
        let image = read_snapshot(sealed(sample(), &last)).expect("reads");
        assert!(image.digest.is_none());
        assert_eq!(image.last_processed_zxid, Some(9));
        // A damaged third seal is damage.
        let good = sealed(sealed(sample(), &digest), &last);
        let mut bad = BytesMut::from(&good[..]);
        let at = bad.len() - 6;
        bad[at] ^= 1;
        assert!(read_snapshot(bad.freeze()).is_err());
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

#[cfg(test)]
mod streaming_tests {
    use super::*;

    /// A reader that fails the test if more than `limit` bytes are asked of it.
    struct Capped<'a> {
        inner: &'a [u8],
        limit: usize,
        read: usize,
    }

    impl std::io::Read for Capped<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = std::io::Read::read(&mut self.inner, buf)?;
            self.read += n;
            assert!(self.read <= self.limit, "read {} bytes", self.read);
            Ok(n)
        }
    }

    /// A snapshot file's header, nothing after it.
    fn header_only() -> BytesMut {
        let mut head = BytesMut::new();
        FileHeader {
            magic: SNAP_MAGIC,
            version: FORMAT_VERSION,
            dbid: -1,
        }
        .write(&mut head);
        head
    }

    #[test]
    fn a_huge_length_is_refused_before_it_is_read() {
        // A header claiming a 512 MiB file of zeros after it: refused within the first bytes.
        let mut head = header_only();
        head.put_i32(0); // sessions
        head.put_i32(0); // ACL cache
        head.put_i32(0x7fff_0000); // a path as long as the file
        let mut bytes = head.to_vec();
        bytes.resize(4096, 0);
        let r = Capped {
            inner: &bytes,
            limit: 64,
            read: 0,
        };
        let err = read_snapshot_from(r, 512 << 20).expect_err("refused");
        assert!(err.reason.contains("invalid length"), "{err}");
    }

    /// `head`, then zeros without end (a sparse file), counting the bytes read.
    struct ZerosAfter {
        inner: std::io::Chain<std::io::Cursor<Vec<u8>>, std::io::Repeat>,
        read: u64,
    }

    impl std::io::Read for ZerosAfter {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }

    /// Reads a 100 GB "file": the header, `then`, and zeros. The error, and the bytes read.
    fn huge(then: &[i32]) -> (SnapshotError, u64) {
        use std::io::Read as _;
        let mut head = header_only();
        for v in then {
            head.put_i32(*v);
        }
        let mut r = ZerosAfter {
            inner: std::io::Cursor::new(head.to_vec()).chain(std::io::repeat(0)),
            read: 0,
        };
        let err = read_snapshot_from(&mut r, 100 << 30).expect_err("refused");
        (err, r.read)
    }

    #[test]
    fn counts_a_sparse_file_claims_are_refused_within_its_first_zeros() {
        // 2^31-1 sessions: the second session 0 is refused.
        let (err, read) = huge(&[i32::MAX]);
        assert!(err.reason.contains("session 0x0 listed twice"), "{err}");
        assert_eq!(err.offset, 16 + 4 + 12);
        assert!(read < 1 << 20, "read {read} bytes");
        // An ACL cache of 2^31-1 entries: index 0 twice.
        let (err, read) = huge(&[0, i32::MAX]);
        assert!(
            err.reason.contains("ACL cache index 0 listed twice"),
            "{err}"
        );
        assert!(read < 1 << 20, "read {read} bytes");
        // One ACL list of 2^31-1 entries: the first has no scheme.
        let (err, read) = huge(&[0, 1, 0, 1, i32::MAX]);
        assert!(err.reason.contains("ACL entry without a scheme"), "{err}");
        assert!(read < 1 << 20, "read {read} bytes");
        // A root node whose data claims 0x7ffffff0 bytes: over ZooKeeper's limit.
        let (err, read) = huge(&[0, 0, 0, 0x7fff_fff0]);
        assert!(err.reason.contains("over the limit"), "{err}");
        assert!(read < 1 << 20, "read {read} bytes");
    }
}
