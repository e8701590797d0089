//! The four-letter words: the commands a fresh connection may send instead of a frame length.

use std::fmt;
use std::str::FromStr;

/// One four-letter word. Its spelling on the wire is [`FourLetterWord::as_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FourLetterWord {
    Conf,
    Cons,
    Crst,
    Dirs,
    Dump,
    Envi,
    Gtmk,
    Ruok,
    Stmk,
    Srst,
    Srvr,
    Stat,
    Wchc,
    Wchp,
    Wchs,
    Mntr,
    Isro,
    Hash,
}

impl FourLetterWord {
    /// Every word, in the order ZooKeeper registers them.
    pub const ALL: [FourLetterWord; 18] = [
        FourLetterWord::Conf,
        FourLetterWord::Cons,
        FourLetterWord::Crst,
        FourLetterWord::Dirs,
        FourLetterWord::Dump,
        FourLetterWord::Envi,
        FourLetterWord::Gtmk,
        FourLetterWord::Ruok,
        FourLetterWord::Stmk,
        FourLetterWord::Srst,
        FourLetterWord::Srvr,
        FourLetterWord::Stat,
        FourLetterWord::Wchc,
        FourLetterWord::Wchp,
        FourLetterWord::Wchs,
        FourLetterWord::Mntr,
        FourLetterWord::Isro,
        FourLetterWord::Hash,
    ];

    /// The words a server answers unless configured otherwise: they name no znode path,
    /// session id or client address, and change nothing. `srvr`, `mntr`, `wchs` and `dirs`
    /// show only counts and sizes; `conf` the settings; `ruok`, `isro`, `gtmk` and `hash`
    /// fixed answers. Left out: `stat` and `cons` (client addresses, session ids), `dump`
    /// (sessions and their ephemeral paths), `wchc`/`wchp` (watched paths and sessions),
    /// `envi` (host name, user, working directory), and `crst`/`srst`/`stmk`, which change
    /// state.
    pub const DEFAULT: [FourLetterWord; 9] = [
        FourLetterWord::Ruok,
        FourLetterWord::Isro,
        FourLetterWord::Srvr,
        FourLetterWord::Mntr,
        FourLetterWord::Wchs,
        FourLetterWord::Dirs,
        FourLetterWord::Conf,
        FourLetterWord::Gtmk,
        FourLetterWord::Hash,
    ];

    /// The word as sent on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            FourLetterWord::Conf => "conf",
            FourLetterWord::Cons => "cons",
            FourLetterWord::Crst => "crst",
            FourLetterWord::Dirs => "dirs",
            FourLetterWord::Dump => "dump",
            FourLetterWord::Envi => "envi",
            FourLetterWord::Gtmk => "gtmk",
            FourLetterWord::Ruok => "ruok",
            FourLetterWord::Stmk => "stmk",
            FourLetterWord::Srst => "srst",
            FourLetterWord::Srvr => "srvr",
            FourLetterWord::Stat => "stat",
            FourLetterWord::Wchc => "wchc",
            FourLetterWord::Wchp => "wchp",
            FourLetterWord::Wchs => "wchs",
            FourLetterWord::Mntr => "mntr",
            FourLetterWord::Isro => "isro",
            FourLetterWord::Hash => "hash",
        }
    }

    /// The word spelt by a connection's first four bytes, if any.
    pub fn from_bytes(first: [u8; 4]) -> Option<FourLetterWord> {
        Self::ALL
            .into_iter()
            .find(|w| w.as_str().as_bytes() == first)
    }
}

impl fmt::Display for FourLetterWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the four-letter words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownWord(pub String);

impl fmt::Display for UnknownWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a four-letter word", self.0)
    }
}

impl std::error::Error for UnknownWord {}

impl FromStr for FourLetterWord {
    type Err = UnknownWord;
    fn from_str(s: &str) -> Result<Self, UnknownWord> {
        Self::ALL
            .into_iter()
            .find(|w| w.as_str() == s)
            .ok_or_else(|| UnknownWord(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelling_round_trips() {
        for w in FourLetterWord::ALL {
            assert_eq!(w.as_str().parse::<FourLetterWord>(), Ok(w));
            let bytes: [u8; 4] = w.as_str().as_bytes().try_into().expect("four bytes");
            assert_eq!(FourLetterWord::from_bytes(bytes), Some(w));
        }
        assert_eq!(
            "kill".parse::<FourLetterWord>(),
            Err(UnknownWord("kill".into()))
        );
        assert_eq!(FourLetterWord::from_bytes(*b"RUOK"), None);
    }
}
