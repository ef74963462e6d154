//! docs/configuration.md against the command line: every visible option of
//! `serve` is in the table of its `--help` group with its environment
//! variable and default, and every option of the client commands is in the
//! client table; neither table names an option the binary lacks.

use std::collections::BTreeMap;

use clap::CommandFactory;

use super::Cli;

const PAGE: &str = include_str!("../../docs/configuration.md");

/// An option as a table documents it or the binary declares it: its group,
/// environment variable and default (empty when it has none).
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    group: String,
    env: String,
    default: String,
}

/// The rows of the tables under the page's `## {section}`, by option; the
/// group is the `###` heading above each table (the section's name when
/// there is none).
fn documented(section: &str) -> BTreeMap<String, Entry> {
    let body = PAGE
        .split(&format!("\n## {section}\n"))
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_else(|| panic!("docs/configuration.md has no section {section}"));
    let mut group = section.to_owned();
    let mut rows = BTreeMap::new();
    for line in body.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            heading.clone_into(&mut group);
        }
        if !line.starts_with("| `--") {
            continue;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        let quoted = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        let flags = quoted(cells[0]);
        let envs = quoted(cells[1]);
        assert!(envs.is_empty() || envs.len() == flags.len(), "{line}");
        for (index, flag) in flags.into_iter().enumerate() {
            let entry = Entry {
                group: group.clone(),
                env: envs.get(index).cloned().unwrap_or_default(),
                default: cells[2].trim_matches('`').to_owned(),
            };
            assert!(
                rows.insert(flag, entry).is_none(),
                "{line} repeats an option"
            );
        }
    }
    rows
}

/// The visible long options of `command`, as [`Entry`]s under `group` (or
/// their help heading when `group` is `None`).
fn declared(command: &clap::Command, group: Option<&str>) -> BTreeMap<String, Entry> {
    command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .filter_map(|arg| {
            let long = arg.get_long()?;
            let default: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|value| value.to_string_lossy().into_owned())
                .collect();
            let entry = Entry {
                group: group
                    .or(arg.get_help_heading())
                    .unwrap_or_default()
                    .to_owned(),
                env: arg
                    .get_env()
                    .map_or_else(String::new, |env| env.to_string_lossy().into_owned()),
                default: default.join(","),
            };
            Some((format!("--{long}"), entry))
        })
        .filter(|(flag, _)| flag != "--help")
        .collect()
}

/// Compares what the page documents with what the binary declares: the
/// same options, in the same groups, with the same variables, and the same
/// defaults where the binary has one (the page writes "–" or "off" for none).
fn assert_same(documented: &BTreeMap<String, Entry>, declared: &BTreeMap<String, Entry>) {
    assert_eq!(
        documented.keys().collect::<Vec<_>>(),
        declared.keys().collect::<Vec<_>>(),
        "docs/configuration.md's options differ from the binary's"
    );
    for (flag, entry) in declared {
        let page = &documented[flag];
        assert_eq!(page.group, entry.group, "group of {flag}");
        assert_eq!(page.env, entry.env, "variable of {flag}");
        if !entry.default.is_empty() && entry.default != "false" {
            assert_eq!(page.default, entry.default, "default of {flag}");
        }
    }
}

#[test]
fn the_server_options_table_matches_serve() {
    let cli = Cli::command();
    let serve = cli.find_subcommand("serve").expect("a serve command");
    let declared = declared(serve, None);
    assert!(declared.contains_key("--listen"), "{declared:?}");
    assert_same(&documented("Server options"), &declared);
}

#[test]
fn the_client_options_table_matches_the_client_commands() {
    let mut cli = Cli::command();
    cli.build();
    let mut declared = BTreeMap::new();
    for name in ["rollouts", "stats", "enqueue", "complete"] {
        let command = cli.find_subcommand(name).expect("a client command");
        let options = declared_of_group(command, "Client options");
        assert!(options.contains_key("--server"), "{name}: {options:?}");
        if declared.is_empty() {
            declared = options;
        } else {
            assert_eq!(declared, options, "{name} takes other client options");
        }
    }
    let bench = cli.find_subcommand("bench").expect("a bench command");
    let bench_options = declared_of_group(bench, "Server options");
    for flag in declared.keys().filter(|flag| *flag != "--json") {
        assert!(bench_options.contains_key(flag), "bench lacks {flag}");
    }
    assert_same(&documented("Client commands"), &declared);
}

/// The options of `command` under the help heading `heading`, as the
/// client table lists them (group: the page's section).
fn declared_of_group(command: &clap::Command, heading: &str) -> BTreeMap<String, Entry> {
    declared(command, None)
        .into_iter()
        .filter(|(_, entry)| entry.group == heading)
        .map(|(flag, entry)| {
            let entry = Entry {
                group: "Client commands".to_owned(),
                ..entry
            };
            (flag, entry)
        })
        .collect()
}
