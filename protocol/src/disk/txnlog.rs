//! Transaction log files (`version-2/log.<first zxid hex>`): entry framing and a scanner.
//!
//! Layout: file header (`ZKLG`, version 2, dbid 0), then one entry per transaction: the
//! Adler-32 of the transaction bytes (as a long), their length (int), the bytes (`TxnHeader`
//! followed by the body, optionally followed by a tree digest), and the end-of-record byte
//! `'B'`. Writers may pre-allocate the file with zeros; a zero length marks the end.
//!
//! The scanner reads a file entry by entry through [`LogSource`] (never the whole file at
//! once), checks every length against the file's real size and against the largest entry a
//! reader accepts before reading, and judges a bad entry as ZooKeeper's reader does: an
//! entry whose bytes end before its length says, or whose end-of-record byte is missing
//! (pre-allocated zeros where the write did not reach), is where the log ends — what a crash
//! mid-write leaves; a whole entry whose checksum fails, or a length no writer produces, is
//! damage. zkd is stricter in one way: when the log seems to end, it looks for a valid entry
//! later in the file, and one found makes the file damaged. That search ends at the first
//! page of zeros after the bad entry (pre-allocation), so a huge zero-filled tail costs one
//! page to judge.

use bytes::{BufMut, Bytes, BytesMut};

use super::{
    txn_type, Adler32, CreateTxn, FileHeader, NewNode, TxnEntry, TxnHeader, FORMAT_VERSION,
    LOG_MAGIC,
};
use crate::Jute;

/// The end-of-record byte after every entry.
pub const END_OF_RECORD: u8 = b'B';
/// Size of the file header.
pub const HEADER_LEN: usize = 16;
/// Checksum and length before the transaction bytes.
const ENTRY_HEAD: usize = 12;
/// How much of the file the search for a later valid entry reads at once.
const SEARCH_WINDOW: usize = 1 << 20;
/// A page of zeros (aligned to this size in the file) ends the search for a later entry.
pub const ZERO_PAGE: u64 = 4096;
/// ZooKeeper's default `jute.maxbuffer` (the largest request it accepts).
pub const DEFAULT_JUTE_MAXBUFFER: u64 = 0xfffff;

/// The largest entry ZooKeeper's log reader accepts with `jute.maxbuffer` set to
/// `jute_maxbuffer`: that much plus as much again of slack (its default
/// `zookeeper.jute.maxbuffer.extrasize`, never below 1024). A longer length is refused as
/// unreasonable, never allocated.
pub fn max_entry_len(jute_maxbuffer: u64) -> u64 {
    jute_maxbuffer + jute_maxbuffer.max(1024)
}

/// The bytes a new log file starts with.
pub fn file_header() -> Bytes {
    crate::to_bytes(&FileHeader {
        magic: LOG_MAGIC,
        version: FORMAT_VERSION,
        dbid: 0,
    })
}

/// Frames one encoded transaction (header + body) as a log entry, appending to `out`.
pub fn frame_entry(txn: &[u8], out: &mut BytesMut) {
    out.reserve(txn.len() + 13);
    out.put_i64(i64::from(Adler32::of(txn)));
    out.put_i32(txn.len() as i32);
    out.put_slice(txn);
    out.put_u8(END_OF_RECORD);
}

/// The log entry of one create, as transaction `zxid` at time 1 from no session: a
/// persistent node at `path` with `data`, open to all. What tests and tools writing a log
/// by hand put in it.
pub fn create_entry(zxid: i64, path: &str, data: Option<Bytes>) -> BytesMut {
    let mut txn = BytesMut::new();
    TxnHeader {
        client_id: 0,
        cxid: 0,
        zxid,
        time: 1,
        txn_type: txn_type::CREATE,
    }
    .write(&mut txn);
    CreateTxn {
        node: NewNode {
            path: path.into(),
            data,
            acl: crate::Acl::open_unsafe(),
        },
        ephemeral: false,
        parent_cversion: 0,
    }
    .write(&mut txn);
    let mut framed = BytesMut::new();
    frame_entry(&txn, &mut framed);
    framed
}

/// Random access to a log file's bytes: a file (the server implements it with positioned
/// reads) or bytes in memory.
pub trait LogSource {
    /// The real length of the file.
    fn size(&self) -> u64;
    /// Fills `buf` from `offset`; `offset + buf.len()` is never past [`LogSource::size`].
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
}

impl LogSource for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let start = usize::try_from(offset).map_err(std::io::Error::other)?;
        let src = self
            .get(start..start + buf.len())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// How a scanned log file ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    /// The last entry ends exactly at the end of the file.
    Clean,
    /// Zero pre-allocation follows the last entry at this offset (and nothing valid after).
    Padding(u64),
    /// An incomplete final entry starts at `offset` (its bytes end before its length says,
    /// or its end-of-record byte is missing), with nothing valid after it: what a crash in
    /// the middle of a write leaves. Everything before it is good.
    Torn { offset: u64, reason: String },
    /// A bad entry at `offset` with a valid entry after it (at `next_entry`), or a whole
    /// entry that cannot be a write a crash interrupted: its checksum fails, its length is
    /// over the limit, or its checksum holds but it does not decode (`next_entry` is then
    /// the next valid entry, if any). The file is damaged, and the entries from `offset` on
    /// must not be given up silently.
    Damaged {
        offset: u64,
        reason: String,
        next_entry: Option<u64>,
    },
}

/// The good entries of a log file (with the offset each starts at) and how it ends.
#[derive(Debug, Clone)]
pub struct LogScan {
    pub entries: Vec<(u64, TxnEntry)>,
    pub end: LogEnd,
    /// The file's length.
    pub size: u64,
}

/// Why a file cannot be scanned as a transaction log at all (wrong header, or a read
/// failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotALog(pub String);

/// What is at one offset.
enum Step {
    /// A valid entry and the offset after it.
    Entry(TxnEntry, u64),
    /// The end of the file.
    End,
    /// Zero pre-allocation.
    Zeros,
    /// Not a valid entry. `torn` when it reads as the end of the log (what an interrupted
    /// write leaves); otherwise it is damage wherever it is. `extent` is the offset its
    /// length claims it ends at (where the search for a later entry may stop at zeros).
    Bad {
        reason: String,
        torn: bool,
        extent: u64,
    },
}

fn io_failed(offset: u64, e: std::io::Error) -> NotALog {
    NotALog(format!("read failed at offset {offset}: {e}"))
}

/// Reads the entry at `pos`. Lengths are checked against the file's size and against
/// `max_entry` before anything is allocated.
fn step<S: LogSource + ?Sized>(src: &S, pos: u64, max_entry: u64) -> Result<Step, NotALog> {
    let size = src.size();
    let rest = size.saturating_sub(pos);
    if rest == 0 {
        return Ok(Step::End);
    }
    if rest < ENTRY_HEAD as u64 {
        let mut tail = vec![0u8; rest as usize];
        src.read_at(pos, &mut tail).map_err(|e| io_failed(pos, e))?;
        return Ok(if tail.iter().all(|b| *b == 0) {
            Step::Zeros
        } else {
            Step::Bad {
                reason: "entry header cut short by the end of the file".into(),
                torn: true,
                extent: size,
            }
        });
    }
    let mut head = [0u8; ENTRY_HEAD];
    src.read_at(pos, &mut head).map_err(|e| io_failed(pos, e))?;
    let crc = i64::from_be_bytes([
        head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7],
    ]);
    let len = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
    if len == 0 && crc == 0 {
        return Ok(Step::Zeros);
    }
    if len == 0 {
        // A checksum written without its length: the write stopped there.
        return Ok(Step::Bad {
            reason: "entry length 0 after a checksum".into(),
            torn: true,
            extent: pos + ENTRY_HEAD as u64,
        });
    }
    if len < 0 || len as u64 > max_entry {
        return Ok(Step::Bad {
            reason: format!(
                "entry length {len} is impossible (a log entry holds 1 to {max_entry} bytes; \
                 a larger jute.maxbuffer raises the limit)"
            ),
            torn: false,
            extent: pos,
        });
    }
    let len = len as u64;
    let extent = pos + ENTRY_HEAD as u64 + len + 1;
    if extent > size {
        return Ok(Step::Bad {
            reason: format!("entry length {len} runs past the end of the file ({rest} bytes left)"),
            torn: true,
            extent,
        });
    }
    let mut body = vec![0u8; len as usize + 1];
    src.read_at(pos + ENTRY_HEAD as u64, &mut body)
        .map_err(|e| io_failed(pos, e))?;
    Ok(match check_entry(body, crc, extent) {
        Step::Entry(entry, _) => Step::Entry(entry, extent),
        other => other,
    })
}

/// Checks an entry's bytes (transaction bytes and the end-of-record byte) against its
/// stored checksum. An `Entry` carries `extent`, where the entry ends.
fn check_entry(mut body: Vec<u8>, crc: i64, extent: u64) -> Step {
    if body.pop() != Some(END_OF_RECORD) {
        return Step::Bad {
            reason: "missing end-of-record byte".into(),
            torn: true,
            extent,
        };
    }
    let computed = Adler32::of(&body);
    if i64::from(computed) != crc {
        return Step::Bad {
            reason: format!(
                "checksum mismatch (stored 0x{crc:x}, computed 0x{computed:x}) in a whole \
                 entry: its length and end-of-record byte are intact, so it is not a write a \
                 crash interrupted"
            ),
            torn: false,
            extent,
        };
    }
    match TxnEntry::decode(Bytes::from(body)) {
        Ok(entry) => Step::Entry(entry, extent),
        Err(e) => Step::Bad {
            reason: format!(
                "undecodable transaction with a valid checksum ({e}): the bytes are as \
                 written, so it is not a write a crash interrupted"
            ),
            torn: false,
            extent,
        },
    }
}

/// Whether the page of [`ZERO_PAGE`] bytes at `at` in `window` is all zeros.
fn zero_page_at(window: &[u8], at: usize) -> bool {
    window[at..at + ZERO_PAGE as usize].iter().all(|b| *b == 0)
}

/// The offset of the first valid entry that starts after `from`, if any. Reads the file a
/// window at a time and skips runs of zeros quickly. The search ends at the first
/// page-aligned page of zeros at or after `zeros_from` (a pre-allocated tail): no writer
/// leaves an entry after one, and a huge file of zeros is judged by its first page.
pub fn find_entry_after<S: LogSource + ?Sized>(
    src: &S,
    from: u64,
    zeros_from: u64,
    max_entry: u64,
) -> Result<Option<u64>, NotALog> {
    let size = src.size();
    let mut base = from + 1;
    let mut window = Vec::new();
    while base + (ENTRY_HEAD as u64) < size {
        let n = (size - base).min(SEARCH_WINDOW as u64) as usize;
        window.resize(n, 0);
        src.read_at(base, &mut window)
            .map_err(|e| io_failed(base, e))?;
        // Candidates start before the first page of zeros in this window, if there is one.
        let first_page = zeros_from.max(base).div_ceil(ZERO_PAGE) * ZERO_PAGE;
        let mut page = first_page;
        let stop = loop {
            if page + ZERO_PAGE > base + n as u64 {
                break None;
            }
            if zero_page_at(&window, (page - base) as usize) {
                break Some((page - base) as usize);
            }
            page += ZERO_PAGE;
        };
        let end = stop.unwrap_or(n);
        let mut i = 0;
        while i < end && i + ENTRY_HEAD <= n {
            let len_bytes = [window[i + 8], window[i + 9], window[i + 10], window[i + 11]];
            if len_bytes == [0; 4] {
                // The next candidate's length field must hold a non-zero byte.
                i = match window[i + ENTRY_HEAD..].iter().position(|b| *b != 0) {
                    Some(p) => (i + ENTRY_HEAD + p).saturating_sub(11).max(i + 1),
                    None => n.saturating_sub(11).max(i + 1),
                };
                continue;
            }
            let len = i32::from_be_bytes(len_bytes);
            let at = base + i as u64;
            if len > 0 && len as u64 <= max_entry && at + ENTRY_HEAD as u64 + (len as u64) < size {
                let extent = at + ENTRY_HEAD as u64 + len as u64 + 1;
                let end = i + ENTRY_HEAD + len as usize + 1;
                let found = if end <= n {
                    // Cheap rejections first: the end-of-record byte, then the checksum.
                    window[end - 1] == END_OF_RECORD && {
                        let crc = i64::from_be_bytes([
                            window[i],
                            window[i + 1],
                            window[i + 2],
                            window[i + 3],
                            window[i + 4],
                            window[i + 5],
                            window[i + 6],
                            window[i + 7],
                        ]);
                        let body = window[i + ENTRY_HEAD..end].to_vec();
                        matches!(check_entry(body, crc, extent), Step::Entry(..))
                    }
                } else {
                    matches!(step(src, at, max_entry)?, Step::Entry(..))
                };
                if found {
                    return Ok(Some(at));
                }
            }
            i += 1;
        }
        if stop.is_some() {
            return Ok(None);
        }
        base += i.max(1) as u64;
    }
    Ok(None)
}

/// Reads and checks a log file's header.
fn check_header<S: LogSource + ?Sized>(src: &S) -> Result<(), NotALog> {
    if src.size() < HEADER_LEN as u64 {
        return Err(NotALog(format!(
            "file too short for a log header ({} bytes)",
            src.size()
        )));
    }
    let mut head = [0u8; HEADER_LEN];
    src.read_at(0, &mut head).map_err(|e| io_failed(0, e))?;
    let header = FileHeader::read(&mut crate::Reader::new(Bytes::copy_from_slice(&head)))
        .map_err(|e| NotALog(e.to_string()))?;
    if header.magic != LOG_MAGIC {
        return Err(NotALog(format!(
            "not a transaction log (magic 0x{:08x}, expected 0x{:08x} \"ZKLG\")",
            header.magic, LOG_MAGIC
        )));
    }
    if header.version != FORMAT_VERSION {
        return Err(NotALog(format!(
            "unsupported log version {}",
            header.version
        )));
    }
    Ok(())
}

/// Scans a log file, accepting entries of up to `max_entry` bytes (see [`max_entry_len`]).
/// Only a wrong header (or a failed read) is an error; how the entries end is reported in
/// [`LogScan::end`], with the good entries before it.
pub fn scan<S: LogSource + ?Sized>(src: &S, max_entry: u64) -> Result<LogScan, NotALog> {
    check_header(src)?;
    let mut entries = Vec::new();
    let mut pos = HEADER_LEN as u64;
    let end = loop {
        match step(src, pos, max_entry)? {
            Step::Entry(entry, next) => {
                entries.push((pos, entry));
                pos = next;
            }
            Step::End => break LogEnd::Clean,
            Step::Zeros => match find_entry_after(src, pos, pos, max_entry)? {
                None => break LogEnd::Padding(pos),
                Some(next) => {
                    break LogEnd::Damaged {
                        offset: pos,
                        reason: "a zero-filled region where an entry should be".into(),
                        next_entry: Some(next),
                    }
                }
            },
            Step::Bad {
                reason,
                torn: false,
                extent,
            } => {
                break LogEnd::Damaged {
                    offset: pos,
                    reason,
                    next_entry: find_entry_after(src, pos, extent, max_entry)?,
                }
            }
            Step::Bad {
                reason,
                torn: true,
                extent,
            } => match find_entry_after(src, pos, extent, max_entry)? {
                None => {
                    break LogEnd::Torn {
                        offset: pos,
                        reason,
                    }
                }
                Some(next) => {
                    break LogEnd::Damaged {
                        offset: pos,
                        reason,
                        next_entry: Some(next),
                    }
                }
            },
        }
    };
    Ok(LogScan {
        entries,
        end,
        size: src.size(),
    })
}

/// Counts the valid entries from `from` to the end of the file, resuming after every bad
/// stretch (what giving up the file's tail at a damaged entry would drop).
pub fn count_entries_from<S: LogSource + ?Sized>(
    src: &S,
    from: u64,
    max_entry: u64,
) -> Result<u64, NotALog> {
    let mut count = 0;
    let mut pos = from;
    loop {
        let zeros_from = match step(src, pos, max_entry)? {
            Step::Entry(_, next) => {
                count += 1;
                pos = next;
                continue;
            }
            Step::End => return Ok(count),
            Step::Zeros => pos,
            Step::Bad { extent, .. } => extent,
        };
        match find_entry_after(src, pos, zeros_from, max_entry)? {
            Some(next) => pos = next,
            None => return Ok(count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DeleteTxn, TxnBody};
    use super::*;

    const LIMIT: u64 = 2 * DEFAULT_JUTE_MAXBUFFER;

    fn entry(zxid: i64) -> Bytes {
        let mut b = BytesMut::new();
        TxnHeader {
            client_id: 1,
            cxid: 2,
            zxid,
            time: 3,
            txn_type: txn_type::DELETE,
        }
        .write(&mut b);
        DeleteTxn { path: "/x".into() }.write(&mut b);
        b.freeze()
    }

    fn file(n: i64) -> BytesMut {
        let mut f = BytesMut::from(&file_header()[..]);
        for z in 1..=n {
            frame_entry(&entry(z), &mut f);
        }
        f
    }

    fn scan_bytes(b: &[u8]) -> LogScan {
        scan(b, LIMIT).expect("log")
    }

    #[test]
    fn a_create_entry_reads_back_as_that_create() {
        let mut f = BytesMut::from(&file_header()[..]);
        f.extend_from_slice(&create_entry(7, "/n", Some(Bytes::from_static(b"v"))));
        let scan = scan_bytes(&f);
        assert_eq!(scan.end, LogEnd::Clean);
        let [(_, e)] = &scan.entries[..] else {
            panic!("one entry: {:?}", scan.entries);
        };
        assert_eq!(e.header.zxid, 7);
        let TxnBody::Create(c) = &e.body else {
            panic!("a create: {:?}", e.body);
        };
        assert_eq!(c.node.path, "/n");
        assert_eq!(c.node.data.as_deref(), Some(&b"v"[..]));
        assert_eq!(c.node.acl, crate::Acl::open_unsafe());
        assert!(!c.ephemeral);
    }

    #[test]
    fn clean_padded_and_torn_files() {
        let f = file(3);
        let scan1 = scan_bytes(&f);
        assert_eq!(scan1.entries.len(), 3);
        assert_eq!(scan1.end, LogEnd::Clean);
        assert!(matches!(scan1.entries[2].1.body, TxnBody::Delete(_)));

        let mut padded = f.clone();
        padded.put_bytes(0, 4096);
        let s = scan_bytes(&padded);
        assert_eq!(
            (s.entries.len(), s.end),
            (3, LogEnd::Padding(f.len() as u64))
        );

        let last = scan1.entries[2].0;
        for cut in last as usize + 1..f.len() {
            for zeros in [0, 100] {
                let mut torn = f[..cut].to_vec();
                torn.resize(cut + zeros, 0);
                let s = scan_bytes(&torn);
                assert_eq!(s.entries.len(), 2, "cut at {cut}");
                // A cut inside the leading zero bytes of the checksum looks like padding.
                match s.end {
                    LogEnd::Torn { offset, .. } | LogEnd::Padding(offset) => {
                        assert_eq!(offset, last)
                    }
                    other => panic!("cut at {cut} + {zeros} zeros read as {other:?}"),
                }
            }
        }
        // A final entry whose end-of-record byte is missing (zeros where the write did not
        // reach) is a torn tail, with or without zeros after it.
        for zeros in [0, 100] {
            let mut unfinished = f.to_vec();
            *unfinished.last_mut().expect("bytes") = 0;
            unfinished.resize(unfinished.len() + zeros, 0);
            let s = scan_bytes(&unfinished);
            assert_eq!(s.entries.len(), 2);
            assert!(matches!(s.end, LogEnd::Torn { offset, .. } if offset == last));
        }
    }

    #[test]
    fn a_whole_final_entry_whose_checksum_fails_is_damage() {
        let f = file(3);
        let last = scan_bytes(&f).entries[2].0 as usize;
        // Every bit of the final entry's checksum and transaction bytes: the entry is whole
        // (its length and end-of-record byte intact), so it was written completely and
        // changed since; with or without pre-allocated zeros after it.
        for at in (last..last + 8).chain(last + 12..f.len() - 1) {
            for zeros in [0, 4096] {
                let mut flipped = f.to_vec();
                flipped[at] ^= 0x10;
                flipped.resize(flipped.len() + zeros, 0);
                let s = scan_bytes(&flipped);
                assert_eq!(s.entries.len(), 2, "flip at {at}");
                match s.end {
                    LogEnd::Damaged {
                        offset,
                        reason,
                        next_entry: None,
                    } => {
                        assert_eq!(offset, last as u64);
                        assert!(reason.contains("checksum mismatch"), "{reason}");
                    }
                    other => panic!("flip at {at} + {zeros} zeros read as {other:?}"),
                }
            }
        }
    }

    /// A log source of `size` bytes: `head`, then zeros (a sparse file), counting the bytes
    /// asked of it and the largest single read.
    struct Sparse {
        head: Vec<u8>,
        size: u64,
        read: std::cell::Cell<u64>,
        largest: std::cell::Cell<usize>,
    }

    impl Sparse {
        fn new(head: Vec<u8>, size: u64) -> Sparse {
            Sparse {
                head,
                size,
                read: 0.into(),
                largest: 0.into(),
            }
        }
    }

    impl LogSource for Sparse {
        fn size(&self) -> u64 {
            self.size
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            self.read.set(self.read.get() + buf.len() as u64);
            self.largest.set(self.largest.get().max(buf.len()));
            for (i, b) in buf.iter_mut().enumerate() {
                *b = self
                    .head
                    .get(offset as usize + i)
                    .copied()
                    .unwrap_or_default();
            }
            Ok(())
        }
    }

    #[test]
    fn a_huge_zero_filled_tail_is_judged_by_its_first_page() {
        // 100 GB: three entries, then zeros. Read: at most a search window or two.
        let f = file(3).to_vec();
        let src = Sparse::new(f.clone(), 100 << 30);
        let s = scan(&src, LIMIT).expect("log");
        assert_eq!(
            (s.entries.len(), s.end),
            (3, LogEnd::Padding(f.len() as u64))
        );
        assert!(src.read.get() <= 4 << 20, "read {} bytes", src.read.get());
        // A header and nothing but zeros.
        let src = Sparse::new(f[..HEADER_LEN].to_vec(), 100 << 30);
        let s = scan(&src, LIMIT).expect("log");
        assert_eq!(s.end, LogEnd::Padding(HEADER_LEN as u64));
        assert!(src.read.get() <= 4 << 20, "read {} bytes", src.read.get());
        assert_eq!(
            count_entries_from(&src, HEADER_LEN as u64, LIMIT).expect("count"),
            0
        );
        assert!(src.read.get() <= 8 << 20, "read {} bytes", src.read.get());
    }

    #[test]
    fn a_length_over_the_limit_is_refused_before_it_is_read() {
        // A final entry claiming 0x7ffffff0 bytes in a 4 GiB sparse file: refused as damage
        // (ZooKeeper refuses the length as unreasonable), never read or allocated.
        let mut f = file(2).to_vec();
        let at = f.len();
        f.extend_from_slice(&entry(3));
        f[at + 8..at + 12].copy_from_slice(&0x7fff_fff0i32.to_be_bytes());
        let src = Sparse::new(f.clone(), 4 << 30);
        let s = scan(&src, LIMIT).expect("log");
        assert_eq!(s.entries.len(), 2);
        assert!(
            matches!(&s.end, LogEnd::Damaged { offset, reason, .. }
                if *offset == at as u64 && reason.contains("impossible")),
            "{:?}",
            s.end
        );
        assert!(src.largest.get() <= SEARCH_WINDOW, "{}", src.largest.get());
        assert!(src.read.get() <= 8 << 20, "read {} bytes", src.read.get());
        // Just under the limit and past the end of a small file: a torn tail, as ZooKeeper
        // reads it (the bytes end before the length says).
        let mut f = file(2).to_vec();
        let at = f.len();
        f.extend_from_slice(&entry(3));
        f[at + 8..at + 12].copy_from_slice(&(LIMIT as i32).to_be_bytes());
        let s = scan_bytes(&f);
        assert!(matches!(s.end, LogEnd::Torn { offset, .. } if offset == at as u64));
        // One past the limit: damage.
        f[at + 8..at + 12].copy_from_slice(&(LIMIT as i32 + 1).to_be_bytes());
        let s = scan_bytes(&f);
        assert!(matches!(s.end, LogEnd::Damaged { offset, .. } if offset == at as u64));
        assert_eq!(max_entry_len(DEFAULT_JUTE_MAXBUFFER), LIMIT);
        assert_eq!(max_entry_len(10), 1034);
    }

    #[test]
    fn damage_with_valid_entries_after_it_is_not_a_torn_tail() {
        let f = file(10);
        let good = scan_bytes(&f);
        let fifth = good.entries[4].0 as usize;
        let sixth = good.entries[5].0;
        for at in fifth..sixth as usize {
            for bit in [0x01, 0x80] {
                let mut bad = f.to_vec();
                bad[at] ^= bit;
                let s = scan_bytes(&bad);
                assert_eq!(s.entries.len(), 4, "flip at {at}");
                match s.end {
                    LogEnd::Damaged {
                        offset,
                        next_entry: Some(next),
                        ..
                    } => {
                        assert_eq!(offset, fifth as u64, "flip at {at}");
                        assert_eq!(next, sixth, "flip at {at}");
                        assert_eq!(
                            count_entries_from(&bad[..], offset, LIMIT).expect("count"),
                            5
                        );
                    }
                    other => panic!("flip at {at} read as {other:?}"),
                }
            }
        }
        // The fifth entry is damaged and the sixth found after it.
        let damaged_at_fifth = |bad: &[u8]| {
            let s = scan_bytes(bad);
            assert!(
                matches!(s.end, LogEnd::Damaged { offset, next_entry: Some(n), .. }
                    if offset == fifth as u64 && n == sixth),
                "{:?}",
                s.end
            );
        };
        // An impossible length, followed by valid entries and pre-allocated zeros.
        let mut bad = f.to_vec();
        bad[fifth + 8..fifth + 12].copy_from_slice(&0x7fff_ffffi32.to_be_bytes());
        bad.resize(bad.len() + 64 * 1024, 0);
        damaged_at_fifth(&bad);
        // A zeroed stretch in the middle.
        let mut bad = f.to_vec();
        bad[fifth..sixth as usize].fill(0);
        damaged_at_fifth(&bad);
    }

    #[test]
    fn a_sound_entry_that_does_not_decode_is_damage_even_at_the_end() {
        let mut f = file(2);
        frame_entry(b"short", &mut f);
        let s = scan_bytes(&f);
        assert_eq!(s.entries.len(), 2);
        assert!(
            matches!(
                s.end,
                LogEnd::Damaged {
                    next_entry: None,
                    ..
                }
            ),
            "{:?}",
            s.end
        );
    }

    proptest::proptest! {
        /// Any damage — bytes overwritten anywhere after the header, the file cut anywhere,
        /// zeros appended — scans without a panic; the good entries before the first bad
        /// byte are kept, and a file whose tail was only cut is never called damaged.
        #[test]
        fn mutated_logs_scan_without_panic(
            at in 16usize..2000,
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            cut in 16usize..2000,
            zeros in 0usize..300,
        ) {
            let f = file(20);
            let mut bad = f.to_vec();
            let at = at.min(bad.len());
            for (i, b) in junk.iter().enumerate() {
                if let Some(x) = bad.get_mut(at + i) {
                    *x = *b;
                }
            }
            let s = scan(&bad[..], LIMIT).expect("header intact");
            let before = scan_bytes(&f).entries.iter().filter(|(o, _)| (*o as usize) < at).count();
            proptest::prop_assert!(s.entries.len() + 1 >= before);
            let _ = count_entries_from(&bad[..], HEADER_LEN as u64, LIMIT).expect("counts");

            let mut torn = f[..cut.min(f.len())].to_vec();
            torn.resize(torn.len() + zeros, 0);
            let s = scan(&torn[..], LIMIT).expect("header intact");
            let damaged = matches!(s.end, LogEnd::Damaged { .. });
            proptest::prop_assert!(!damaged, "a cut file read as damaged: {:?}", s.end);
        }
    }

    #[test]
    fn wrong_magic_is_not_a_log() {
        assert!(scan(&b"ZKSN\0\0\0\x02\0\0\0\0\0\0\0\0"[..], LIMIT).is_err());
        assert!(scan(&b"ZK"[..], LIMIT).is_err());
    }
}
