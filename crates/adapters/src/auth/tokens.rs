//! Bearer tokens: the tokens file (one `sha256:<hex> roles=... [workers=...]
//! [namespaces=...] [name=...]` line per token, only hashes on disk), the one admin token of
//! `LIGHTNING_STORE_API_KEY`, lookup in constant time, and reload when the
//! file's content changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::policy::{Permission, Permissions, Role};
use lightning_store_core::access::{Caller, RefusalSink};
use lightning_store_core::namespace::NamespaceName;

/// The prefix of a hashed token in the tokens file.
const HASH_PREFIX: &str = "sha256:";

/// One token: its digest and what it grants.
#[derive(Debug)]
pub struct TokenEntry {
    digest: [u8; 32],
    /// A label for logs (never the token): `name=`, or the line number.
    pub name: Arc<str>,
    permissions: Permissions,
    /// The only worker ids the token may act for; `None`: any.
    workers: Option<Arc<[Box<str>]>>,
    /// The only namespaces the token may use; `None` (`namespaces=*`, or
    /// no `namespaces=`): every one.
    namespaces: Option<Arc<[NamespaceName]>>,
}

impl TokenEntry {
    /// Returns whether the token grants `permission`.
    pub fn allows(&self, permission: Permission) -> bool {
        self.permissions.allow(permission)
    }

    /// Returns whether the token grants every permission (admin).
    pub fn allows_everything(&self) -> bool {
        self.permissions == Permissions::of(&[Role::Admin])
    }

    /// Returns whether the token may act for `worker_id`.
    pub fn may_act_for(&self, worker_id: &str) -> bool {
        self.workers
            .as_ref()
            .is_none_or(|workers| workers.iter().any(|w| &**w == worker_id))
    }

    /// Returns whether the token may use the namespace `name`.
    pub fn may_use(&self, name: &NamespaceName) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|namespaces| namespaces.contains(name))
    }

    /// Returns whether the token may use every namespace (and so manage
    /// them).
    pub fn reaches_every_namespace(&self) -> bool {
        self.namespaces.is_none()
    }

    /// Returns the namespace a call with this token works in when it names
    /// none: the token's one namespace, when it is limited to one.
    pub fn own_namespace(&self) -> Option<&NamespaceName> {
        match self.namespaces.as_deref() {
            Some([only]) => Some(only),
            _ => None,
        }
    }

    /// Returns the caller the token makes a call: bound to its workers
    /// when it has some (refusals told to `refusals`), else anyone.
    pub fn caller(&self, refusals: &Arc<dyn RefusalSink>) -> Caller {
        match &self.workers {
            Some(workers) => Caller::bound(self.name.clone(), workers.clone(), refusals.clone()),
            None => Caller::anyone(),
        }
    }
}

/// Returns the SHA-256 digest of a token.
fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// What a tokens-file line grants beyond its roles.
#[derive(Debug, Default)]
pub struct LineScope<'a> {
    /// The worker ids the token may act for (empty: any).
    pub workers: &'a [String],
    /// The namespaces the token may use (empty: every one).
    pub namespaces: &'a [String],
    /// A label for logs.
    pub name: Option<&'a str>,
}

/// Returns the tokens-file line of `token` with `roles`, within `scope`.
pub fn file_line(token: &str, roles: &[Role], scope: &LineScope<'_>) -> String {
    let hex = hex::encode(digest(token));
    let roles: Vec<String> = roles.iter().map(Role::to_string).collect();
    let mut line = format!("{HASH_PREFIX}{hex} roles={}", roles.join(","));
    if !scope.workers.is_empty() {
        line.push_str(&format!(" workers={}", scope.workers.join(",")));
    }
    if !scope.namespaces.is_empty() {
        line.push_str(&format!(" namespaces={}", scope.namespaces.join(",")));
    }
    let name = scope.name;
    if let Some(name) = name {
        line.push_str(&format!(" name={name}"));
    }
    line
}

/// Parses a tokens file. Errors name the line number, never its content.
pub fn parse_file(text: &str) -> Result<Vec<TokenEntry>, String> {
    let mut entries = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |reason: String| format!("tokens file line {number}: {reason}");
        let mut fields = line.split_whitespace();
        let hash = fields.next().unwrap_or("");
        let hex = hash
            .strip_prefix(HASH_PREFIX)
            .ok_or_else(|| at(format!("must start with {HASH_PREFIX}<64 hex digits>")))?;
        let digest = parse_hex(hex).ok_or_else(|| at("the hash is not 64 hex digits".into()))?;
        let (mut roles, mut workers, mut namespaces, mut name) = (None, None, None, None);
        for field in fields {
            let (key, value) = field
                .split_once('=')
                .ok_or_else(|| at(format!("expected key=value, got {field:?}")))?;
            let list = || value.split(',').filter(|v| !v.is_empty());
            match key {
                "roles" => {
                    roles = Some(
                        list()
                            .map(str::parse)
                            .collect::<Result<Vec<Role>, _>>()
                            .map_err(at)?,
                    );
                }
                "workers" => workers = Some(list().map(Box::from).collect::<Arc<[_]>>()),
                "namespaces" if value == "*" => namespaces = None,
                "namespaces" => {
                    namespaces = Some(
                        list()
                            .map(NamespaceName::parse)
                            .collect::<Result<Arc<[_]>, _>>()
                            .map_err(|_| {
                                at("namespaces= holds a name outside the rule (1 to 63 \
                                    lowercase letters, digits and hyphens, or `*`)"
                                    .into())
                            })?,
                    );
                }
                "name" => name = Some(value),
                _ => {
                    return Err(at(format!(
                        "unknown key {key:?} (roles, workers, namespaces, name)"
                    )));
                }
            }
        }
        let roles = roles
            .filter(|r| !r.is_empty())
            .ok_or_else(|| at("roles=... is required".into()))?;
        if workers.as_ref().is_some_and(|w| w.is_empty()) {
            return Err(at("workers= lists no worker id".into()));
        }
        if namespaces
            .as_ref()
            .is_some_and(|n: &Arc<[NamespaceName]>| n.is_empty())
        {
            return Err(at("namespaces= lists no namespace (`*`: every one)".into()));
        }
        entries.push(TokenEntry {
            digest,
            name: Arc::from(name.map_or_else(|| format!("line {number}"), str::to_owned)),
            permissions: Permissions::of(&roles),
            workers,
            namespaces,
        });
    }
    Ok(entries)
}

fn parse_hex(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// The tokens the server accepts: those of the file plus the environment's
/// admin token, swapped as a whole on reload. Clones share them.
#[derive(Debug, Clone)]
pub struct Tokens {
    file: Option<PathBuf>,
    env_token: Option<Arc<TokenEntry>>,
    state: Arc<RwLock<Loaded>>,
}

#[derive(Debug, Default)]
struct Loaded {
    /// The file's bytes the entries were parsed from (a reload compares them).
    source: Vec<u8>,
    /// Whether the file was read once (an empty `source` is a valid read).
    loaded: bool,
    entries: Arc<[Arc<TokenEntry>]>,
}

impl Tokens {
    /// Loads the tokens of `file` and `api_key` (an admin token); `None`
    /// when neither is given, which leaves the port open.
    pub fn load(file: Option<&Path>, api_key: Option<&str>) -> Result<Option<Self>, String> {
        if file.is_none() && api_key.is_none() {
            return Ok(None);
        }
        let env_token = api_key.map(|key| {
            Arc::new(TokenEntry {
                digest: digest(key),
                name: Arc::from("api-key"),
                permissions: Permissions::of(&[Role::Admin]),
                workers: None,
                namespaces: None,
            })
        });
        let tokens = Self {
            file: file.map(Path::to_owned),
            env_token,
            state: Arc::default(),
        };
        tokens.reload()?;
        Ok(Some(tokens))
    }

    /// Re-reads the tokens file; swaps the tokens when its content changed.
    /// Returns whether it did; on error the tokens in use stay.
    pub fn reload(&self) -> Result<bool, String> {
        let source = match &self.file {
            Some(path) => std::fs::read(path)
                .map_err(|e| format!("cannot read tokens file {}: {e}", path.display()))?,
            None => Vec::new(),
        };
        {
            let state = self.state.read();
            if state.loaded && state.source == source {
                return Ok(false);
            }
        }
        let parsed = std::str::from_utf8(&source)
            .map_err(|_| "the tokens file is not UTF-8".to_owned())
            .and_then(parse_file);
        let mut state = self.state.write();
        // A bad file is reported once, not at every poll, until it changes.
        state.source = source;
        state.loaded = true;
        let mut entries: Vec<Arc<TokenEntry>> = parsed?.into_iter().map(Arc::new).collect();
        entries.extend(self.env_token.clone());
        if entries.is_empty() {
            return Err("the tokens file holds no token".to_owned());
        }
        state.entries = entries.into();
        Ok(true)
    }

    /// Returns the entry of `token`, comparing its digest with every
    /// entry's in constant time.
    pub fn find(&self, token: &str) -> Option<Arc<TokenEntry>> {
        let given = digest(token);
        let entries = self.state.read().entries.clone();
        let mut found = None;
        for entry in entries.iter() {
            if bool::from(entry.digest.ct_eq(&given)) {
                found = Some(entry.clone());
            }
        }
        found
    }

    /// Returns the path of the tokens file, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Returns how many tokens are accepted (never zero).
    pub fn count(&self) -> usize {
        self.state.read().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_line_round_trips_and_only_its_token_matches() {
        let line = file_line(
            "s3cret",
            &[Role::Runner],
            &LineScope {
                workers: &["w1".into(), "w2".into()],
                namespaces: &["run-a".into()],
                name: Some("r"),
            },
        );
        assert!(
            line.starts_with("sha256:") && !line.contains("s3cret"),
            "{line}"
        );
        let entries = parse_file(&format!("# comment\n\n{line}  # trailing\n")).unwrap();
        assert_eq!(entries.len(), 1);
        let entry = &entries[0];
        assert_eq!(entry.digest, digest("s3cret"));
        assert_eq!(&*entry.name, "r");
        assert!(entry.allows(Permission::Work) && !entry.allows(Permission::Resources));
        let run_a = NamespaceName::parse("run-a").unwrap();
        assert!(entry.may_use(&run_a) && !entry.may_use(&NamespaceName::default_namespace()));
        assert_eq!(entry.own_namespace(), Some(&run_a));
        assert!(!entry.reaches_every_namespace());
        #[derive(Debug)]
        struct Uncounted;
        impl RefusalSink for Uncounted {
            fn worker_refused(&self) {}
        }
        let caller = entry.caller(&(Arc::new(Uncounted) as Arc<dyn RefusalSink>));
        assert!(
            caller.check_worker(Some("w2")).is_ok() && caller.check_worker(Some("w3")).is_err()
        );
        assert!(
            caller.check_worker_named(None).is_err(),
            "a bound token must name a worker"
        );
    }

    #[test]
    fn bad_lines_name_their_number_and_not_their_content() {
        let good = file_line("t", &[Role::Read], &LineScope::default());
        for (text, needle) in [
            ("plain-token roles=admin", "line 1: must start with sha256:"),
            (
                "sha256:abcd roles=admin",
                "line 1: the hash is not 64 hex digits",
            ),
            (
                &format!("\n{good} roles=root"),
                "line 2: unknown role \"root\"",
            ),
            (
                &format!("{} ", good.replace(" roles=read", "")),
                "roles=... is required",
            ),
            (&format!("{good} workers="), "lists no worker id"),
            (&format!("{good} namespaces="), "lists no namespace"),
            (&format!("{good} namespaces=Run_A"), "outside the rule"),
            (&format!("{good} colour=red"), "unknown key \"colour\""),
        ] {
            let error = parse_file(text).unwrap_err();
            assert!(error.contains(needle), "{text:?}: {error}");
        }
    }

    #[test]
    fn tokens_reload_when_the_file_changes_and_keep_the_old_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(
            &path,
            file_line("one", &[Role::Read], &LineScope::default()),
        )
        .unwrap();
        let tokens = Tokens::load(Some(&path), Some("key")).unwrap().unwrap();
        assert!(tokens.find("one").is_some() && tokens.find("key").is_some());
        assert!(tokens.find("two").is_none());
        assert!(!tokens.reload().unwrap(), "unchanged file");
        std::fs::write(
            &path,
            file_line("two", &[Role::Read], &LineScope::default()),
        )
        .unwrap();
        assert!(tokens.reload().unwrap());
        assert!(tokens.find("one").is_none() && tokens.find("two").is_some());
        std::fs::write(&path, "garbage").unwrap();
        assert!(tokens.reload().is_err());
        assert!(tokens.find("two").is_some(), "the last good tokens stay");
        assert!(!tokens.reload().unwrap(), "a bad file is reported once");
        assert!(Tokens::load(None, None).unwrap().is_none());
    }
}
