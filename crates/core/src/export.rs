//! Exports: a run's data taken out of the store while training goes on.
//! What an export selects (the rollouts matching a filter that had ended
//! before it started, in rollout id order), where it stands (its
//! [`Cursor`], from which an interrupted export continues without
//! duplicates or gaps) and what it reads of each rollout ([`RolloutRecord`]:
//! the `rollouts` layout's record, from which the training layouts'
//! records are shaped, [`RolloutRecord::triplets`] and
//! [`RolloutRecord::conversation`]). The engine pages through the selection
//! (`Engine::export`); the adapters write the records as JSON.

use std::sync::Arc;

use crate::agl1::{Agl1Event, Agl1State, diagnosis};
use crate::error::{StoreError, StoreResult, echo};
use crate::model::{Attempt, RolloutStatus, RolloutView, Span, Timestamp};
use crate::pages::RolloutDownload;
use crate::query::{FilterLogic, RolloutFilter, TimeRange};
use crate::reward::{RewardDimension, final_reward};
use crate::trajectory::{self, Conversation, Trace, TripletRecord};

/// Rollouts read per page of the selection: a page's rollouts are listed
/// (without their attempts and spans) in one read, then each one is read
/// whole on its own, so an export holds at most this many listed rollouts
/// and one whole rollout at a time.
pub const PAGE_ROLLOUTS: usize = 100;

/// The shape of an export's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// One record per rollout with its attempts and spans or events nested.
    #[default]
    Rollouts,
    /// The rollout's training rows, skipped model calls, or why it gives
    /// none ([`RolloutRecord::triplets`]): one or more records per rollout.
    Triplets,
    /// The rollout as one conversation ([`RolloutRecord::conversation`]):
    /// none for a rollout without an answered model call.
    Messages,
}

impl Layout {
    /// Returns the layout's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rollouts => "rollouts",
            Self::Triplets => "triplets",
            Self::Messages => "messages",
        }
    }

    /// Returns the layout of a name.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Rollouts, Self::Triplets, Self::Messages]
            .into_iter()
            .find(|layout| layout.as_str() == name)
    }
}

/// The text a cursor of this version starts with.
const CURSOR_PREFIX: &str = "x2.";

/// The text a cursor of the first version started with (no selection
/// key; still read, unchecked).
const CURSOR_PREFIX_V1: &str = "x1.";

/// Where an export stands: the instant that fixed its selection, what it
/// selects and writes (its filter and layout, as a key), and the last
/// rollout it sent (none at the start). Written as text
/// (`x2.<nanoseconds>.<key>.<rollout id>`) into each record and the
/// stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// Rollouts that had ended before this instant are selected.
    pub selected_at: Timestamp,
    /// The [`selection_key`] of the export's filter and layout; `None` in
    /// a cursor of the first version, which did not carry it.
    pub selection: Option<String>,
    /// The last rollout sent; the export continues after it.
    pub after: Option<String>,
}

impl Cursor {
    /// Returns the cursor of a new export of `selection`, selecting at
    /// `selected_at`.
    pub fn start(selected_at: Timestamp, selection: String) -> Self {
        Self {
            selected_at,
            selection: Some(selection),
            after: None,
        }
    }

    /// Returns the cursor after `rollout_id`, in the same selection.
    pub fn after(&self, rollout_id: &str) -> Self {
        Self {
            after: Some(rollout_id.to_owned()),
            ..self.clone()
        }
    }

    /// Returns the cursor as text.
    pub fn encode(&self) -> String {
        let after = self.after.as_deref().unwrap_or("");
        match &self.selection {
            Some(key) => format!("{CURSOR_PREFIX}{}.{key}.{after}", self.selected_at.0),
            None => format!("{CURSOR_PREFIX_V1}{}.{after}", self.selected_at.0),
        }
    }

    /// Reads a cursor written by [`Cursor::encode`]; INVALID_ARGUMENT,
    /// naming `field`, for any other text.
    pub fn parse(field: &str, text: &str) -> StoreResult<Self> {
        let invalid =
            || StoreError::invalid(format!("{field}: {} is not an export cursor", echo(text)));
        let (selection, nanos, after) = if let Some(rest) = text.strip_prefix(CURSOR_PREFIX) {
            let mut parts = rest.splitn(3, '.');
            let (Some(nanos), Some(key), Some(after)) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(invalid());
            };
            if key.len() != 16 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid());
            }
            (Some(key.to_owned()), nanos, after)
        } else {
            let rest = text.strip_prefix(CURSOR_PREFIX_V1).ok_or_else(invalid)?;
            let (nanos, after) = rest.split_once('.').ok_or_else(invalid)?;
            (None, nanos, after)
        };
        let nanos = nanos.parse::<i64>().map_err(|_| invalid())?;
        if !nanos.is_positive() {
            return Err(invalid());
        }
        Ok(Self {
            selected_at: Timestamp(nanos),
            selection,
            after: (!after.is_empty()).then(|| after.to_owned()),
        })
    }

    /// Checks that the cursor continues an export of `selection` (the
    /// filter and layout it is resumed with); INVALID_ARGUMENT, naming
    /// `field`, when it was written by an export of another.
    pub fn check_selection(&self, field: &str, selection: &str) -> StoreResult<()> {
        match &self.selection {
            Some(key) if key != selection => Err(StoreError::invalid(format!(
                "{field}: the cursor is of an export with other filters or another layout; \
                 resume with the options the export started with"
            ))),
            _ => Ok(()),
        }
    }
}

/// Returns the key of what an export selects and how it writes it: its
/// filter's conditions and its layout (16 hex digits of an FNV-1a hash of
/// their canonical text), so that a cursor is resumed only with them.
pub fn selection_key(filter: &RolloutFilter, layout: Layout) -> String {
    let mut statuses: Vec<&str> = filter
        .status_in
        .iter()
        .flatten()
        .map(|s| s.as_str())
        .collect();
    statuses.sort_unstable();
    let mut modes: Vec<&str> = filter
        .mode_in
        .iter()
        .flatten()
        .map(|m| m.map_or("none", |m| m.as_str()))
        .collect();
    modes.sort_unstable();
    let time = |t: Option<Timestamp>| t.map(|t| t.0.to_string()).unwrap_or_default();
    let text = [
        layout.as_str().to_owned(),
        format!("{}:{}", filter.status_in.is_some(), statuses.join(",")),
        format!("{}:{}", filter.mode_in.is_some(), modes.join(",")),
        time(filter.start_time.from),
        time(filter.start_time.until),
        time(filter.end_time.from),
        time(filter.end_time.until),
        filter.resources_id.clone().unwrap_or_default(),
        filter.worker_id.clone().unwrap_or_default(),
        filter.rollout_id_contains.clone().unwrap_or_default(),
    ]
    .map(|part| format!("{}:{part}", part.len()))
    .concat();
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Checks that `filter` is one an export takes: the narrowing conditions
/// of a rollout query (statuses, modes, creation and end windows,
/// resources, worker, part of the id), AND-ed; the position is the
/// export's own.
pub fn check_filter(filter: &RolloutFilter) -> StoreResult<()> {
    if filter.logic != FilterLogic::And
        || filter.rollout_id_in.is_some()
        || filter.rollout_id_after.is_some()
    {
        return Err(StoreError::invalid(
            "an export's filter combines its conditions with AND and names no rollout ids",
        ));
    }
    Ok(())
}

/// Returns the filter of the selection after `cursor`: `filter`'s
/// conditions, the terminal statuses among those it allows, rollouts that
/// ended before the selection's instant (and before the end of `filter`'s
/// end window, if earlier), after the cursor's rollout.
pub fn selection_filter(filter: &RolloutFilter, cursor: &Cursor) -> RolloutFilter {
    let terminal = [
        RolloutStatus::Succeeded,
        RolloutStatus::Failed,
        RolloutStatus::Cancelled,
    ];
    let status_in = match &filter.status_in {
        Some(statuses) => statuses
            .iter()
            .copied()
            .filter(|s| s.is_finished())
            .collect(),
        None => terminal.to_vec(),
    };
    RolloutFilter {
        status_in: Some(status_in),
        end_time: TimeRange {
            from: filter.end_time.from,
            until: Some(
                filter
                    .end_time
                    .until
                    .map_or(cursor.selected_at, |until| until.min(cursor.selected_at)),
            ),
        },
        rollout_id_after: cursor.after.clone(),
        ..filter.clone()
    }
}

/// One record of the `rollouts` layout: a rollout with its latest attempt,
/// its final reward, every attempt, and its spans (0.x) or events (1.x).
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutRecord {
    pub view: RolloutView,
    /// The rollout's final reward, its primary value: 1.x, the last reward
    /// event's number ([`diagnosis::diagnose`]); 0.x, the value of the
    /// reward agent-lightning reads from its spans
    /// ([`crate::reward::final_reward`]). `None` when none is recorded.
    pub reward: Option<f64>,
    /// 0.x: the reward span's dimensions, the primary first; empty for 1.x.
    pub reward_dimensions: Vec<RewardDimension>,
    pub attempts: Vec<Attempt>,
    /// In sequence order; empty when retention deleted them.
    pub spans: Vec<Arc<Span>>,
    /// The span retention deleted the rollout's spans.
    pub spans_evicted: bool,
    /// Its 1.x events (of its event attempt); `None` for a rollout of the
    /// 0.x API.
    pub events: Option<Vec<Agl1Event>>,
    /// Its 1.x error message, if any.
    pub error_message: Option<String>,
    /// The export's cursor after this rollout.
    pub cursor: Cursor,
}

impl RolloutRecord {
    /// Shapes a rollout read whole into its record. Fails only on stored
    /// 1.x event data that is not JSON.
    pub fn new(download: RolloutDownload, cursor: Cursor) -> StoreResult<Self> {
        let (reward, reward_dimensions) = match &download.agl1_events {
            Some(events) => {
                let state = Agl1State::of(download.view.rollout.status);
                let error = download.agl1_error_message.as_deref();
                (
                    diagnosis::diagnose(state, error, events)?.reward,
                    Vec::new(),
                )
            }
            None => final_reward(download.spans.iter().map(|span| &**span))
                .map_or((None, Vec::new()), |reward| {
                    (Some(reward.value()), reward.dimensions)
                }),
        };
        Ok(Self {
            view: download.view,
            reward,
            reward_dimensions,
            attempts: download.attempts,
            spans: download.spans,
            spans_evicted: download.spans_evicted,
            events: download.agl1_events,
            error_message: download.agl1_error_message,
            cursor,
        })
    }

    /// The rollout's `triplets` records ([`trajectory::triplets`]): never
    /// empty (a rollout without a row gives one `no_rows` record).
    pub fn triplets(&self) -> StoreResult<Vec<TripletRecord>> {
        let spans = self.latest_attempt_spans();
        trajectory::triplets(
            &self.view.rollout,
            self.view.attempt.as_ref(),
            self.trace(&spans),
        )
    }

    /// The rollout's `messages` record ([`trajectory::conversation`]);
    /// `None` when no model call was answered.
    pub fn conversation(&self) -> StoreResult<Option<Conversation>> {
        let spans = self.latest_attempt_spans();
        trajectory::conversation(
            &self.view.rollout,
            self.view.attempt.as_ref(),
            self.trace(&spans),
        )
    }

    /// Where its model calls were recorded: 1.x, its events; 0.x, `spans`.
    fn trace<'a>(&'a self, spans: &'a [Span]) -> Trace<'a> {
        match &self.events {
            Some(events) => Trace::Events {
                events,
                error_message: self.error_message.as_deref(),
            },
            None => Trace::Spans(spans),
        }
    }

    /// 0.x: the spans of its latest attempt, as agent-lightning's adapter
    /// reads one attempt's spans (none for 1.x, or without an attempt).
    fn latest_attempt_spans(&self) -> Vec<Span> {
        let Some(attempt) = self.view.attempt.as_ref().filter(|_| self.events.is_none()) else {
            return Vec::new();
        };
        self.spans
            .iter()
            .filter(|span| span.attempt_id == attempt.attempt_id)
            .map(|span| Span::clone(span))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RolloutMode;

    #[test]
    fn a_cursor_reads_back_as_written() {
        let key = selection_key(&RolloutFilter::default(), Layout::Rollouts);
        let start = Cursor::start(Timestamp(1_700_000_000_123_456_789), key.clone());
        assert_eq!(start.encode(), format!("x2.1700000000123456789.{key}."));
        assert_eq!(Cursor::parse("after", &start.encode()).unwrap(), start);
        let next = start.after("ro-a.b");
        assert_eq!(Cursor::parse("after", &next.encode()).unwrap(), next);
        // A cursor of the first version reads back, without a key.
        let old = Cursor::parse("after", "x1.12.ro-a.b").unwrap();
        assert_eq!(
            (old.selection, old.after.as_deref()),
            (None, Some("ro-a.b"))
        );
        for bad in [
            "",
            "x1.",
            "x1.12",
            "x3.12.ro",
            "x1.-5.ro",
            "x1.abc.ro",
            "x2.12.ro",
            "x2.12.0123456789abcdeg.ro",
        ] {
            let error = Cursor::parse("after", bad).unwrap_err();
            assert!(
                matches!(error, StoreError::InvalidArgument(_)),
                "{bad}: {error:?}"
            );
        }
    }

    #[test]
    fn a_cursor_resumes_only_the_filter_and_layout_it_was_written_by() {
        let train = RolloutFilter {
            mode_in: Some(vec![Some(RolloutMode::Train), None]),
            status_in: Some(vec![RolloutStatus::Failed, RolloutStatus::Succeeded]),
            ..RolloutFilter::default()
        };
        let key = selection_key(&train, Layout::Triplets);
        let cursor = Cursor::start(Timestamp(10), key.clone()).after("ro-1");
        // The same conditions in another order are the same selection.
        let reordered = RolloutFilter {
            mode_in: Some(vec![None, Some(RolloutMode::Train)]),
            status_in: Some(vec![RolloutStatus::Succeeded, RolloutStatus::Failed]),
            ..RolloutFilter::default()
        };
        assert_eq!(selection_key(&reordered, Layout::Triplets), key);
        assert!(cursor.check_selection("after", &key).is_ok());
        for other in [
            selection_key(&train, Layout::Rollouts),
            selection_key(&RolloutFilter::default(), Layout::Triplets),
            selection_key(
                &RolloutFilter {
                    resources_id: Some("rs-1".to_owned()),
                    ..train.clone()
                },
                Layout::Triplets,
            ),
        ] {
            assert_ne!(other, key);
            let error = cursor.check_selection("after", &other).unwrap_err();
            assert!(error.to_string().contains("other filters"), "{error}");
        }
        // A first-version cursor is not checked.
        let old = Cursor::parse("after", "x1.10.ro-1").unwrap();
        assert!(old.check_selection("after", &key).is_ok());
    }

    #[test]
    fn the_selection_keeps_terminal_rollouts_ended_before_its_instant() {
        let cursor = Cursor::start(Timestamp(10), String::new()).after("ro-1");
        let asked = RolloutFilter {
            status_in: Some(vec![RolloutStatus::Running, RolloutStatus::Failed]),
            ..RolloutFilter::default()
        };
        let selection = selection_filter(&asked, &cursor);
        assert_eq!(selection.status_in, Some(vec![RolloutStatus::Failed]));
        assert_eq!(selection.end_time.until, Some(Timestamp(10)));
        assert_eq!(selection.rollout_id_after.as_deref(), Some("ro-1"));
        let start = Cursor::start(Timestamp(10), String::new());
        let all = selection_filter(&RolloutFilter::default(), &start);
        assert_eq!(all.status_in.unwrap().len(), 3);
        assert!(check_filter(&selection).is_err());
        assert!(check_filter(&asked).is_ok());
        // An end window is kept, cut at the selection's instant.
        let window = |from: i64, until: i64| RolloutFilter {
            end_time: TimeRange {
                from: Some(Timestamp(from)),
                until: Some(Timestamp(until)),
            },
            ..RolloutFilter::default()
        };
        let early = selection_filter(&window(2, 5), &start);
        assert_eq!(early.end_time, window(2, 5).end_time);
        let late = selection_filter(&window(2, 50), &start);
        assert_eq!(late.end_time, window(2, 10).end_time);
        assert!(check_filter(&window(2, 50)).is_ok());
    }
}
