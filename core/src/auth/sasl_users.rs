//! The SASL DIGEST-MD5 user database (`--sasl-users FILE`): `name:password` lines, or a JAAS
//! configuration whose `Server { ... user_NAME="password"; }` section lists the users as
//! ZooKeeper's server reads it.

use std::collections::BTreeMap;
use std::fmt;

/// Users allowed to log in with SASL DIGEST-MD5, with their passwords.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SaslUsers {
    users: BTreeMap<String, String>,
}

impl fmt::Debug for SaslUsers {
    // Names only: passwords never reach a log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.users.keys()).finish()
    }
}

impl SaslUsers {
    /// An empty database.
    pub fn new() -> SaslUsers {
        SaslUsers::default()
    }

    /// Adds (or replaces) one user.
    pub fn insert(&mut self, name: &str, password: &str) {
        self.users.insert(name.to_string(), password.to_string());
    }

    /// The password of `name`, if it is a known user.
    pub fn password(&self, name: &str) -> Option<&str> {
        self.users.get(name).map(String::as_str)
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether there are no users.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Parses a users file. A text with a `{` is read as a JAAS file: the options named
    /// `user_NAME` of every login module in its `section` (ZooKeeper's default is `Server`)
    /// are the users. Otherwise each non-blank line not starting with `#` is `name:password`
    /// (the password is everything after the first colon).
    pub fn parse(text: &str, section: &str) -> Result<SaslUsers, String> {
        if text.contains('{') {
            parse_jaas(text, section)
        } else {
            parse_lines(text)
        }
    }
}

fn parse_lines(text: &str) -> Result<SaslUsers, String> {
    let mut users = SaslUsers::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let Some((name, password)) = line.split_once(':') else {
            return Err(format!("line {} is not of the form name:password", n + 1));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(format!("line {} has an empty user name", n + 1));
        }
        users.insert(name, password);
    }
    Ok(users)
}

/// A JAAS configuration as a token stream: words, quoted strings and punctuation; comments
/// (`//` and `/* */`) dropped.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Punct(char),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                loop {
                    match chars.next() {
                        Some('/') if prev == '*' => break,
                        Some(c) => prev = c,
                        None => return Err("unterminated /* comment".into()),
                    }
                }
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => s.push(c),
                            None => return Err("unterminated quoted string".into()),
                        },
                        Some(c) => s.push(c),
                        None => return Err("unterminated quoted string".into()),
                    }
                }
                out.push(Token::Quoted(s));
            }
            '{' | '}' | ';' | '=' => out.push(Token::Punct(c)),
            c => {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || matches!(n, '{' | '}' | ';' | '=' | '"') {
                        break;
                    }
                    s.push(n);
                    chars.next();
                }
                out.push(Token::Word(s));
            }
        }
    }
    Ok(out)
}

/// `Name { module flag key=value ...; ... };` sections.
fn parse_jaas(text: &str, section: &str) -> Result<SaslUsers, String> {
    let tokens = tokenize(text)?;
    let mut users = SaslUsers::new();
    let mut found = false;
    let mut i = 0;
    let word = |t: Option<&Token>| match t {
        Some(Token::Word(w)) => Some(w.clone()),
        _ => None,
    };
    while i < tokens.len() {
        let name = word(tokens.get(i)).ok_or("expected a section name")?;
        if tokens.get(i + 1) != Some(&Token::Punct('{')) {
            return Err(format!("expected {{ after section {name}"));
        }
        i += 2;
        let wanted = name == section;
        found |= wanted;
        // Login module entries until the closing brace.
        loop {
            match tokens.get(i) {
                Some(Token::Punct('}')) => {
                    i += 1;
                    if tokens.get(i) == Some(&Token::Punct(';')) {
                        i += 1;
                    }
                    break;
                }
                Some(Token::Word(_)) => {
                    // module class and control flag
                    i += 1;
                    word(tokens.get(i))
                        .ok_or(format!("expected a control flag in section {name}"))?;
                    i += 1;
                    loop {
                        match tokens.get(i) {
                            Some(Token::Punct(';')) => {
                                i += 1;
                                break;
                            }
                            Some(Token::Word(key)) => {
                                if tokens.get(i + 1) != Some(&Token::Punct('=')) {
                                    return Err(format!("expected = after option {key}"));
                                }
                                let value = match tokens.get(i + 2) {
                                    Some(Token::Quoted(v)) | Some(Token::Word(v)) => v.clone(),
                                    _ => return Err(format!("expected a value for option {key}")),
                                };
                                if wanted {
                                    if let Some(user) = key.strip_prefix("user_") {
                                        users.insert(user, &value);
                                    }
                                }
                                i += 3;
                            }
                            _ => {
                                return Err(format!(
                                    "unterminated login module entry in section {name}"
                                ))
                            }
                        }
                    }
                }
                _ => return Err(format!("unterminated section {name}")),
            }
        }
    }
    if !found {
        return Err(format!("no {section} section in the JAAS file"));
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_password_lines() {
        let u = SaslUsers::parse("# users\nbob:secret\n\nalice:pa:ss\r\n", "Server").unwrap();
        assert_eq!(u.password("bob"), Some("secret"));
        assert_eq!(u.password("alice"), Some("pa:ss"));
        assert_eq!(u.len(), 2);
        assert!(SaslUsers::parse("nocolon\n", "Server").is_err());
        assert!(SaslUsers::parse(":pw\n", "Server").is_err());
        assert_eq!(format!("{u:?}"), r#"{"alice", "bob"}"#);
    }

    #[test]
    fn jaas_server_section() {
        let text = r#"
            // comment
            Server {
              org.apache.zookeeper.server.auth.DigestLoginModule required
              user_super="adminsecret"
              user_bob="bob \"pw\"";
            };
            /* the client side */
            Client {
              org.apache.zookeeper.server.auth.DigestLoginModule required
              username="bob"
              password="x";
            };
        "#;
        let u = SaslUsers::parse(text, "Server").unwrap();
        assert_eq!(u.password("super"), Some("adminsecret"));
        assert_eq!(u.password("bob"), Some("bob \"pw\""));
        assert_eq!(u.len(), 2);
        assert!(SaslUsers::parse(text, "Other").is_err());
        assert!(SaslUsers::parse("Server { x required user_a=\"b\"", "Server").is_err());
    }
}
