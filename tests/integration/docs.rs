//! The documentation against the repository and the binary, so that a page
//! cannot drift from either:
//!
//! - every relative link and anchor of every tracked Markdown file resolves,
//!   parsed with pulldown-cmark (a CommonMark parser already in the build:
//!   prost's code generation uses it), and so do the `docs/*.md` references
//!   in the source, the tests and the CI scripts;
//! - every command block of the README and the user guides (`docs/`) marked
//!   runnable runs, in order, against the real binary, on `PATH` as
//!   `lightning-store`.
//!
//! A runnable block is a fenced block whose info string has the word
//! `runnable` after its language: ```` ```sh runnable ````. GitHub shows only
//! the language. More words say how to run it:
//!
//! - `server`: the block starts the store and keeps running, as in a
//!   terminal of its own: it runs in the background, and the next block
//!   starts once the server logged that it serves (it fails if the server
//!   exits first). A later `server` block stops the previous server first.
//! - `background`: another long-running process (a controller, a model
//!   server), left running until the page's blocks are done.
//! - `agl0`, `agl1`: the block runs with agent-lightning 0.3.0's or 1.0.2's
//!   Python environment first on `PATH` (`tools/pyenv.sh`, shared with the
//!   other tests).
//!
//! A page's blocks run in one bash script (`set -euo pipefail`), so shell
//! variables set in one block are seen by the next, in a fresh directory
//! per page. Python blocks are written to a file and run with `python`. Two
//! rewrites keep the tests on loopback and on free ports: `0.0.0.0` becomes
//! `127.0.0.1`, and every port a block names after a loopback host
//! (`127.0.0.1:4747`, `localhost:8000`) becomes a free port, the same one
//! wherever the page names that number. `LIGHTNING_STORE_LISTEN` and
//! `LIGHTNING_STORE_SERVER` point at the port of 4747, so that a bare
//! `lightning-store serve` and the client commands meet there, as they do
//! on the default port.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// How long one page's blocks may run.
const PAGE_DEADLINE: Duration = Duration::from_secs(300);

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's files matching `patterns`, relative to it: tracked
/// ones, and new ones git does not ignore.
fn tracked(patterns: &[&str]) -> Vec<PathBuf> {
    let output = Command::new("git")
        .arg("-C")
        .arg(repository())
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
        ])
        .args(patterns)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git ls-files failed");
    output
        .stdout
        .split(|&byte| byte == 0)
        .filter(|name| !name.is_empty())
        .map(|name| PathBuf::from(String::from_utf8(name.to_vec()).unwrap()))
        .filter(|path| repository().join(path).exists())
        .collect()
}

fn parser(text: &str) -> Parser<'_> {
    Parser::new_ext(
        text,
        Options::ENABLE_TABLES | Options::ENABLE_HEADING_ATTRIBUTES,
    )
}

/// The anchors of a Markdown text: GitHub's slug of every heading (with
/// `-1`, `-2`, ... for repeats) and every HTML `id`/`name` attribute.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    for event in parser(text) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                if let Some(id) = id {
                    found.insert(id.to_string());
                }
                heading = Some(String::new());
            }
            Event::End(TagEnd::Heading(_)) => {
                let slug = slug(&heading.take().unwrap_or_default());
                let repeats = seen.entry(slug.clone()).or_default();
                found.insert(match *repeats {
                    0 => slug,
                    n => format!("{slug}-{n}"),
                });
                *repeats += 1;
            }
            Event::Text(piece) | Event::Code(piece) => {
                if let Some(heading) = heading.as_mut() {
                    heading.push_str(&piece);
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                for attribute in ["id=\"", "name=\""] {
                    for (at, _) in html.match_indices(attribute) {
                        let value = &html[at + attribute.len()..];
                        if let Some(end) = value.find('"') {
                            found.insert(value[..end].to_owned());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// GitHub's anchor of a heading: lower case, spaces to hyphens, and every
/// character that is not a letter, a digit, `-` or `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// `path` relative to the repository with `.` and `..` resolved, or `None`
/// when it leaves the repository.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(part) => parts.push(part),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// Checks one link of `file` (relative to the repository); returns what is
/// wrong with it, if anything. `anchors_of` caches each target's anchors.
fn check_link(
    file: &Path,
    destination: &str,
    anchors_of: &mut BTreeMap<PathBuf, BTreeSet<String>>,
) -> Option<String> {
    if destination.contains("://") || destination.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match destination.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (destination, None),
    };
    let target = if path.is_empty() {
        file.to_owned()
    } else if let Some(from_root) = path.strip_prefix('/') {
        PathBuf::from(from_root)
    } else {
        file.parent().unwrap_or(Path::new("")).join(path)
    };
    let Some(target) = normalise(&target) else {
        return Some(format!("{destination}: leaves the repository"));
    };
    let on_disk = repository().join(&target);
    if !on_disk.exists() {
        return Some(format!(
            "{destination}: {} does not exist",
            target.display()
        ));
    }
    let fragment = fragment?;
    if target.extension().is_none_or(|extension| extension != "md") {
        // Line anchors of source files (`#L10`) are GitHub's, not the file's.
        return None;
    }
    let anchors = anchors_of
        .entry(target.clone())
        .or_insert_with(|| anchors(&std::fs::read_to_string(&on_disk).unwrap_or_default()));
    (!anchors.contains(fragment)).then(|| {
        format!(
            "{destination}: no anchor #{fragment} in {}",
            target.display()
        )
    })
}

#[test]
fn every_relative_link_and_anchor_in_the_markdown_resolves() {
    let mut anchors_of = BTreeMap::new();
    let mut broken = Vec::new();
    let files = tracked(&["*.md"]);
    assert!(files.iter().any(|file| file == Path::new("README.md")));
    for file in &files {
        let text = std::fs::read_to_string(repository().join(file)).unwrap();
        for (event, range) in parser(&text).into_offset_iter() {
            let destination = match event {
                Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => dest_url,
                _ => continue,
            };
            if let Some(problem) = check_link(file, &destination, &mut anchors_of) {
                let line = text[..range.start].lines().count().max(1);
                broken.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The references to `docs/<page>.md` (and `docs/<page>.md#<anchor>`) in the source,
/// the tests, the build files and the CI scripts resolve too.
#[test]
fn the_sources_references_to_the_docs_resolve() {
    let mut anchors_of = BTreeMap::new();
    let mut broken = Vec::new();
    let files = tracked(&[
        "*.rs", "*.py", "*.ts", "*.sh", "*.toml", "*.yaml", "*.tpl", ".ci/*",
    ]);
    assert!(files.iter().any(|file| file == Path::new("src/main.rs")));
    for file in &files {
        let Ok(text) = std::fs::read_to_string(repository().join(file)) else {
            continue;
        };
        for (at, _) in text.match_indices("docs/") {
            let reference: String = text[at..]
                .chars()
                .take_while(|&c| c.is_ascii_alphanumeric() || "/._-#".contains(c))
                .collect();
            let reference = reference.trim_end_matches(['.', '#']);
            let Some(end) = reference.find(".md") else {
                continue;
            };
            let (path, rest) = reference.split_at(end + 3);
            // Only whole references: a page, or a page and an anchor.
            if !(rest.is_empty() || rest.starts_with('#')) {
                continue;
            }
            // From the repository's root, whatever directory holds the file.
            let destination = format!("/{path}{rest}");
            if let Some(problem) = check_link(file, &destination, &mut anchors_of) {
                let line = text[..at].lines().count().max(1);
                broken.push(format!("{}:{line}: {problem}", file.display()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken references:\n{}",
        broken.join("\n")
    );
}

/// A runnable block of a page.
struct Block {
    line: usize,
    language: String,
    flags: BTreeSet<String>,
    text: String,
}

/// The runnable blocks of a Markdown text, in order.
fn runnable_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut current: Option<Block> = None;
    for (event, range) in parser(text).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let mut words = info.split_whitespace();
                let language = words.next().unwrap_or_default().to_owned();
                let flags: BTreeSet<String> = words.map(str::to_owned).collect();
                if flags.contains("runnable") {
                    current = Some(Block {
                        line: text[..range.start].lines().count() + 1,
                        language,
                        flags,
                        text: String::new(),
                    });
                }
            }
            Event::Text(piece) => {
                if let Some(block) = current.as_mut() {
                    block.text.push_str(&piece);
                }
            }
            Event::End(TagEnd::CodeBlock) => blocks.extend(current.take()),
            _ => {}
        }
    }
    blocks
}

/// The ports the blocks name after a loopback host, each with a free port
/// to use instead.
fn port_map(blocks: &[Block]) -> BTreeMap<String, u16> {
    let mut ports = BTreeMap::new();
    for block in blocks {
        for host in ["127.0.0.1:", "localhost:", "0.0.0.0:"] {
            for (at, _) in block.text.match_indices(host) {
                let port: String = block.text[at + host.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                if port.len() >= 2 && !ports.contains_key(&port) {
                    let free = std::net::TcpListener::bind("127.0.0.1:0")
                        .unwrap()
                        .local_addr()
                        .unwrap()
                        .port();
                    ports.insert(port, free);
                }
            }
        }
    }
    ports
}

/// `text` with `0.0.0.0` on loopback and the mapped ports replaced
/// wherever they stand as a number of their own.
fn rewrite(text: &str, ports: &BTreeMap<String, u16>) -> String {
    let text = text.replace("0.0.0.0", "127.0.0.1");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find(|c: char| c.is_ascii_digit()) {
        let number_end = rest[start..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(rest.len(), |end| start + end);
        let before = rest[..start].chars().next_back();
        let number = &rest[start..number_end];
        out.push_str(&rest[..start]);
        match ports.get(number) {
            Some(port) if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.') => {
                out.push_str(&port.to_string());
            }
            _ => out.push_str(number),
        }
        rest = &rest[number_end..];
    }
    out.push_str(rest);
    out
}

/// The bash script that runs a page's blocks in order.
fn page_script(page: &Path, blocks: &[Block], ports: &BTreeMap<String, u16>) -> String {
    let mut script = String::from(
        r#"set -euo pipefail
# Background blocks run as jobs, each in a process group of its own.
set -m
BACKGROUND=()
SERVER=""
stop() { kill -TERM -- "-$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
# Reads a server block's output (in a process substitution, which ignores the
# SIGTERM sent to the block's process group): writes its log, says on the
# fifo `ready` whether the server came to serve, and on `closed` once every
# process of the block has exited (the output's pipe closed).
watch_server() {
  trap '' TERM
  local log=$1 said=""
  while IFS= read -r line; do
    printf '%s\n' "$line" >> "$log"
    if [ -z "$said" ] && [[ $line == *"serving gRPC and HTTP"* ]]; then echo serving > ready; said=1; fi
  done
  [ -n "$said" ] || echo exited > ready
  echo closed > closed
}
# Starts a server block and returns once it logged that it serves, or fails
# when it exits first. The fifos are held open read-write here, so that
# neither side's open ever blocks.
start_server() {
  local log=$1 script=$2
  if [ -n "$SERVER" ]; then stop_server; fi
  rm -f ready closed && mkfifo ready closed
  exec {READY}<>ready {CLOSED}<>closed
  bash "$script" > >(watch_server "$log") 2>&1 &
  SERVER=$!
  read -r -t 60 -u "$READY" state || state=timeout
  if [ "$state" != serving ]; then echo "the server block did not start ($state)"; cat "$log"; exit 1; fi
}
# Stops the server block and returns once all of it has exited (its drain
# done, its files released).
stop_server() {
  stop "$SERVER"
  read -r -t 60 -u "$CLOSED" _ || echo "the server block did not exit within 60 s"
  exec {READY}>&- {CLOSED}>&-
  SERVER=""
}
cleanup() {
  status=$?
  for job in "${BACKGROUND[@]}"; do stop "$job"; done
  if [ -n "$SERVER" ]; then stop_server; fi
  if [ "$status" -ne 0 ]; then
    for log in *.log; do [ -f "$log" ] && { echo "--- $log"; tail -n 40 "$log"; }; done
  fi
}
trap cleanup EXIT
"#,
    );
    for (index, block) in blocks.iter().enumerate() {
        let name = format!("block-{index}");
        let text = rewrite(&block.text, ports);
        let location = format!("{}:{}", page.display(), block.line);
        script.push_str(&format!("\necho '>>> {location}'\n"));
        let environment = ["agl0", "agl1"]
            .into_iter()
            .find(|name| block.flags.contains(*name));
        let path = environment.map_or(String::new(), |name| {
            format!("PATH=\"${}/bin:$PATH\" ", name.to_uppercase())
        });
        let file = if block.language == "python" {
            format!("{name}.py")
        } else {
            format!("{name}.sh")
        };
        script.push_str(&format!(
            "cat > {file} <<'BLOCK_{index}_END'\n{text}BLOCK_{index}_END\n"
        ));
        let run = if block.language == "python" {
            format!("{path}python {file}")
        } else {
            format!("{path}bash -euo pipefail {file}")
        };
        if block.flags.contains("server") {
            script.push_str(&format!("{path}start_server {name}.log {file}\n"));
        } else if block.flags.contains("background") {
            script.push_str(&format!("{run} > {name}.log 2>&1 &\nBACKGROUND+=($!)\n"));
        } else if block.language == "python" {
            script.push_str(&format!("{run}\n"));
        } else {
            // Sourced, so that the variables it sets reach the next blocks.
            script.push_str(&format!(
                "{}source {file}\n",
                environment.map_or(String::new(), |name| format!(
                    "OLD_PATH=$PATH; PATH=\"${}/bin:$PATH\"; ",
                    name.to_uppercase()
                ))
            ));
            if environment.is_some() {
                script.push_str("PATH=$OLD_PATH\n");
            }
        }
    }
    script
}

/// The directory of a Python environment of `tools/pyenv.sh`.
fn python_environment(name: &str) -> PathBuf {
    let output = Command::new(repository().join("tools/pyenv.sh"))
        .arg(name)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("tools/pyenv.sh runs");
    assert!(output.status.success(), "tools/pyenv.sh {name} failed");
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

/// Returns whether what a page's runnable blocks call beyond the binary
/// (Python and its environments, curl and jq) is on this machine: a page
/// that calls a missing tool is skipped, with the tool's one line.
fn tools_of_page_available(page: &Path) -> bool {
    use crate::common::{Tool, available};
    let text = std::fs::read_to_string(repository().join(page)).unwrap();
    let blocks = runnable_blocks(&text);
    let calls = |word: &str| blocks.iter().any(|block| block.text.contains(word));
    let python = blocks.iter().any(|block| {
        block.language.starts_with("py")
            || block.flags.contains("agl0")
            || block.flags.contains("agl1")
    }) || calls("python")
        || calls("pip ");
    let curl_or_jq = calls("curl") || calls("jq");
    (!python || available(Tool::Python)) && (!curl_or_jq || available(Tool::CurlAndJq))
}

/// Runs the runnable blocks of one page; returns their output.
async fn run_page(page: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(repository().join(page)).unwrap();
    let blocks = runnable_blocks(&text);
    if blocks.is_empty() {
        return Ok(String::new());
    }
    let ports = port_map(&blocks);
    let script = page_script(page, &blocks, &ports);
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_lightning-store"),
        bin.join("lightning-store"),
    )
    .unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("page.sh"), &script).unwrap();
    let store = ports.get("4747").copied().unwrap_or_else(|| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    });
    let mut command = tokio::process::Command::new("bash");
    command
        .arg("page.sh")
        .current_dir(&work)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env_remove("NO_COLOR")
        .kill_on_drop(true);
    // The reader's defaults, whatever the test's environment sets.
    for (name, _) in std::env::vars() {
        if name.starts_with("LIGHTNING_STORE_") {
            command.env_remove(name);
        }
    }
    command
        .env("LIGHTNING_STORE_LISTEN", format!("127.0.0.1:{store}"))
        .env("LIGHTNING_STORE_SERVER", format!("127.0.0.1:{store}"));
    for name in ["agl0", "agl1"] {
        if blocks.iter().any(|block| block.flags.contains(name)) {
            command.env(name.to_uppercase(), python_environment(name));
        }
    }
    let output = tokio::time::timeout(PAGE_DEADLINE, command.output())
        .await
        .map_err(|_| format!("{}: not done within {PAGE_DEADLINE:?}", page.display()))?
        .expect("bash runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Ok(log)
    } else {
        Err(format!(
            "{} failed ({}):\n{log}\n--- the script ---\n{script}",
            page.display(),
            output.status
        ))
    }
}

/// The README and the user guides: the pages whose blocks a reader pastes.
fn guides() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    pages.extend(tracked(&["docs/*.md"]));
    pages
}

/// Runs the runnable blocks of every guide, or of the pages named (comma
/// separated) in `LIGHTNING_STORE_DOCS_PAGES`, e.g.
/// `LIGHTNING_STORE_DOCS_PAGES=docs/security.md cargo test --test integration docs::`.
#[tokio::test]
async fn the_runnable_blocks_of_the_readme_and_the_guides_run() {
    let mut pages = guides();
    if let Ok(only) = std::env::var("LIGHTNING_STORE_DOCS_PAGES") {
        let only: Vec<&str> = only.split(',').collect();
        pages.retain(|page| only.iter().any(|name| page == Path::new(name)));
        assert!(!pages.is_empty(), "no guide named in {only:?}");
    }
    let runnable: Vec<&PathBuf> = pages
        .iter()
        .filter(|page| {
            let text = std::fs::read_to_string(repository().join(page)).unwrap();
            !runnable_blocks(&text).is_empty()
        })
        .collect();
    if std::env::var_os("LIGHTNING_STORE_DOCS_PAGES").is_none() {
        assert!(runnable.len() >= 5, "runnable blocks on only {runnable:?}");
    }
    let mut failures = Vec::new();
    for page in runnable {
        if !tools_of_page_available(page) {
            continue;
        }
        match run_page(page).await {
            // Shown with `--nocapture`.
            Ok(log) => eprintln!("{log}"),
            Err(failure) => failures.push(failure),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(slug("Start and check health"), "start-and-check-health");
    assert_eq!(
        slug("agent-lightning 1.x: the server API"),
        "agent-lightning-1x-the-server-api"
    );
    assert_eq!(slug("`--listen` and `0.0.0.0`"), "--listen-and-0000");
    let text = "# A\n## A\n<a id=\"kept\"></a>\n";
    assert_eq!(
        anchors(text),
        ["a", "a-1", "kept"].map(str::to_owned).into()
    );
}

#[test]
fn ports_are_rewritten_where_they_stand_alone() {
    let ports = BTreeMap::from([("4747".to_owned(), 40001), ("8000".to_owned(), 40002)]);
    assert_eq!(
        rewrite(
            "serve --listen 0.0.0.0:4747 x=4747 http://localhost:8000/v1 v14747 1.4747",
            &ports
        ),
        "serve --listen 127.0.0.1:40001 x=40001 http://localhost:40002/v1 v14747 1.4747"
    );
}
