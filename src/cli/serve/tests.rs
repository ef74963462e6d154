//! `serve`'s options as the binary parses them: units, old names, refusals.
//! (docs/configuration.md is checked against them in `cli::tests`.)

use std::time::Duration;

use clap::Parser;

use super::ServeArgs;
use lightning_store_adapters::transport::TransportLimits;
use lightning_store_core::limits::RequestLimits;

/// `serve` parsed alone, as the binary parses it.
#[derive(Debug, Parser)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
}

fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
    let argv = std::iter::once("serve").chain(args.iter().copied());
    Serve::try_parse_from(argv).map(|serve| serve.args)
}

#[test]
fn durations_are_written_with_units() {
    let args = parse(&[
        "--drain-timeout",
        "1500ms",
        "--idle-timeout",
        "2m",
        "--watchdog-interval",
        "20ms",
        "--longest-wait",
        "1h",
        "--span-retention-age",
        "7d",
    ])
    .unwrap();
    assert_eq!(args.listen.drain_timeout(), Duration::from_millis(1500));
    assert_eq!(
        args.listen.transport_limits().idle_timeout,
        Duration::from_secs(120)
    );
    assert_eq!(args.sessions.watchdog_interval(), Duration::from_millis(20));
    assert_eq!(
        args.limits.request_limits().unwrap().longest_wait,
        Duration::from_secs(3600)
    );
    assert_eq!(
        args.storage.span_retention().max_age,
        Some(Duration::from_secs(7 * 86_400))
    );
}

#[test]
fn defaults_are_the_engines() {
    let args = parse(&[]).unwrap();
    assert_eq!(args.listen.transport_limits(), TransportLimits::default());
    assert_eq!(
        args.limits.request_limits().unwrap(),
        RequestLimits::default()
    );
    assert_eq!(args.listen.drain_timeout(), Duration::from_secs(10));
    assert_eq!(args.sessions.session_grace(), Duration::from_secs(30));
    assert_eq!(args.sessions.watchdog_interval(), Duration::from_millis(50));
    assert_eq!(
        args.telemetry.health_check_interval(),
        Duration::from_secs(5)
    );
    assert_eq!(args.storage.span_retention().max_age, None);
}

#[test]
fn old_names_take_the_old_units() {
    let args = parse(&[
        "--drain-timeout-secs",
        "2.5",
        "--watchdog-interval-ms",
        "20",
        "--health-check-interval-ms",
        "100",
        "--session-grace-secs",
        "1",
        "--gateway-timeout-secs",
        "0.25",
    ])
    .unwrap();
    assert_eq!(args.listen.drain_timeout(), Duration::from_millis(2500));
    assert_eq!(args.sessions.watchdog_interval(), Duration::from_millis(20));
    assert_eq!(
        args.telemetry.health_check_interval(),
        Duration::from_millis(100)
    );
    assert_eq!(args.sessions.session_grace(), Duration::from_secs(1));
    assert_eq!(
        args.gateway.gateway_config().upstream_timeout,
        Duration::from_millis(250)
    );
}

#[test]
fn bad_values_are_refused_by_the_parser() {
    for bad in [
        &["--drain-timeout", "10"][..],
        &["--drain-timeout=-1s"],
        &["--idle-timeout", "0s"],
        &["--idle-timeout-secs", "0"],
        &["--drain-timeout-secs=-1"],
        &["--watchdog-interval-ms", "0.5"],
        &["--server-id", " "],
        &["--max-connections", "0"],
    ] {
        let error = parse(bad).expect_err(&format!("{bad:?} was accepted"));
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::ValueValidation,
            "{bad:?}"
        );
        let flag = bad[0].split('=').next().unwrap();
        assert!(error.to_string().contains(flag), "{error}");
    }
}

#[test]
fn an_old_and_a_new_name_together_conflict() {
    let error = parse(&["--drain-timeout", "1s", "--drain-timeout-secs", "2"]).unwrap_err();
    assert_eq!(error.kind(), clap::error::ErrorKind::ArgumentConflict);
}

#[test]
fn inconsistent_limits_are_refused() {
    let args = parse(&[
        "--max-control-message-bytes",
        "2048",
        "--max-message-bytes",
        "1024",
    ])
    .unwrap();
    assert!(args.limits.request_limits().is_err());
}

#[test]
fn postgres_needs_a_url() {
    let args = parse(&["--store", "postgres"]).unwrap();
    let error = args.storage.store_config().unwrap_err();
    assert!(error.contains("--database-url"), "{error}");
}

#[test]
fn old_names_are_hidden_from_help() {
    let help = <Serve as clap::CommandFactory>::command()
        .render_long_help()
        .to_string();
    assert!(help.contains("--drain-timeout <DRAIN_TIMEOUT>"), "{help}");
    assert!(help.contains("[default: 365d]"), "{help}");
    for heading in [
        "Listening and transport:",
        "Storage:",
        "Request limits:",
        "Worker sessions and watchdog:",
        "LLM gateway:",
        "Security:",
        "Telemetry:",
    ] {
        assert!(help.contains(heading), "{heading} missing from {help}");
    }
    assert!(!help.contains("-secs"), "{help}");
    assert!(!help.contains("-ms "), "{help}");
}

/// Text logs are coloured only on a terminal, and `NO_COLOR` (any
/// non-empty value) turns colours off there too.
#[test]
fn logs_are_coloured_only_on_a_terminal_without_no_color() {
    use std::ffi::OsStr;

    use super::colour_logs;

    assert!(colour_logs(true, None));
    assert!(colour_logs(true, Some(OsStr::new(""))));
    assert!(!colour_logs(true, Some(OsStr::new("1"))));
    assert!(!colour_logs(false, None));
    assert!(!colour_logs(false, Some(OsStr::new(""))));
}
