//! Transaction log files (`version-2/log.<first zxid hex>`): entry framing and a scanner.
//!
//! Layout: file header (`ZKLG`, version 2, dbid 0), then one entry per transaction: the
//! Adler-32 of the transaction bytes (as a long), their length (int), the bytes (`TxnHeader`
//! followed by the body, optionally followed by a tree digest), and the end-of-record byte
//! `'B'`. Writers may pre-allocate the file with zeros; a zero length marks the end.

use bytes::{BufMut, Bytes, BytesMut};

use super::{Adler32, FileHeader, TxnEntry, FORMAT_VERSION, LOG_MAGIC};
use crate::Jute;

/// The end-of-record byte after every entry.
pub const END_OF_RECORD: u8 = b'B';
/// Size of the file header.
pub const HEADER_LEN: usize = 16;

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

/// How a scanned log file ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEnd {
    /// The last entry ends exactly at the end of the file.
    Clean,
    /// Zero pre-allocation follows the last entry at this offset.
    Padding(usize),
    /// A partial or damaged entry starts at `offset`; everything before it is good.
    Torn { offset: usize, reason: String },
}

/// The good entries of a log file (with the offset each starts at) and how it ends.
#[derive(Debug, Clone)]
pub struct LogScan {
    pub entries: Vec<(usize, TxnEntry)>,
    pub end: LogEnd,
}

/// Why a file is not a transaction log at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotALog(pub String);

/// Scans a whole log file. Only the header being wrong is an error; damage later is
/// reported in [`LogScan::end`] with the entries before it.
pub fn scan(bytes: Bytes) -> Result<LogScan, NotALog> {
    if bytes.len() < HEADER_LEN {
        return Err(NotALog(format!(
            "file too short for a log header ({} bytes)",
            bytes.len()
        )));
    }
    let header = FileHeader::read(&mut crate::Reader::new(bytes.slice(..HEADER_LEN)))
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
    let mut entries = Vec::new();
    let mut pos = HEADER_LEN;
    let torn = |offset: usize, reason: &str| LogEnd::Torn {
        offset,
        reason: reason.to_string(),
    };
    let end = loop {
        let rest = &bytes[pos..];
        if rest.is_empty() {
            break LogEnd::Clean;
        }
        if rest.len() < 12 {
            if rest.iter().all(|b| *b == 0) {
                break LogEnd::Padding(pos);
            }
            break torn(pos, "entry header cut short");
        }
        let crc = i64::from_be_bytes(rest[..8].try_into().unwrap_or([0; 8]));
        let len = i32::from_be_bytes(rest[8..12].try_into().unwrap_or([0; 4]));
        if len == 0 && crc == 0 {
            break LogEnd::Padding(pos);
        }
        if len <= 0 {
            break torn(pos, "invalid entry length");
        }
        let len = len as usize;
        if rest.len() < 12 + len + 1 {
            break torn(pos, "entry cut short");
        }
        let txn = bytes.slice(pos + 12..pos + 12 + len);
        if rest[12 + len] != END_OF_RECORD {
            break torn(pos, "missing end-of-record byte");
        }
        if i64::from(Adler32::of(&txn)) != crc {
            break torn(pos, "checksum mismatch");
        }
        match TxnEntry::decode(txn) {
            Ok(entry) => entries.push((pos, entry)),
            Err(e) => break torn(pos, &format!("undecodable transaction ({e})")),
        }
        pos += 12 + len + 1;
    };
    Ok(LogScan { entries, end })
}

#[cfg(test)]
mod tests {
    use super::super::{txn_type, DeleteTxn, TxnBody, TxnHeader};
    use super::*;

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

    #[test]
    fn clean_padded_and_torn_files() {
        let f = file(3);
        let scan1 = scan(f.clone().freeze()).expect("log");
        assert_eq!(scan1.entries.len(), 3);
        assert_eq!(scan1.end, LogEnd::Clean);
        assert!(matches!(scan1.entries[2].1.body, TxnBody::Delete(_)));

        let mut padded = f.clone();
        padded.put_bytes(0, 4096);
        let s = scan(padded.freeze()).expect("log");
        assert_eq!((s.entries.len(), s.end), (3, LogEnd::Padding(f.len())));

        let last = scan1.entries[2].0;
        for cut in last + 1..f.len() {
            let s = scan(f.clone().freeze().slice(..cut)).expect("log");
            assert_eq!(s.entries.len(), 2, "cut at {cut}");
            // A cut inside the leading zero bytes of the checksum looks like padding.
            match s.end {
                LogEnd::Torn { offset, .. } | LogEnd::Padding(offset) => assert_eq!(offset, last),
                LogEnd::Clean => panic!("cut at {cut} read as clean"),
            }
        }
        let mut flipped = f.to_vec();
        flipped[last + 20] ^= 1;
        let s = scan(Bytes::from(flipped)).expect("log");
        assert_eq!(s.entries.len(), 2);
        assert!(matches!(s.end, LogEnd::Torn { offset, .. } if offset == last));
    }

    #[test]
    fn wrong_magic_is_not_a_log() {
        assert!(scan(Bytes::from_static(b"ZKSN\0\0\0\x02\0\0\0\0\0\0\0\0")).is_err());
        assert!(scan(Bytes::from_static(b"ZK")).is_err());
    }
}
