//! The geometry of the console's charts: scales computed here, drawn as
//! SVG by the `chart.html` template (so that their colours come from the
//! style sheet, follow the light or dark mode, and no `style` attribute
//! is needed under the Content-Security-Policy). Every bar carries a
//! `<title>`, which screen readers and tooltips read.

use askama::Template;

use super::format;
use lightning_store_core::model::Timestamp;

/// Width of a chart's drawing, in SVG units (the SVG scales to its box).
const WIDTH: f64 = 1000.0;
/// Height of a chart's drawing.
const HEIGHT: f64 = 200.0;
/// Room for the value labels on the left and the time labels below.
const LEFT: f64 = 44.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 8.0;
const BOTTOM: f64 = 22.0;

/// One series of a chart: a value per bucket.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: &'static str,
    /// The style sheet's class of its bars (`ok`, `bad`, `muted`, ...).
    pub class: &'static str,
    pub values: Vec<u64>,
    /// The values count events per bucket, so that their sum means
    /// something (shown in the legend); a level (a depth) has no sum.
    pub summed: bool,
}

/// A bar of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    pub class: &'static str,
    pub title: String,
}

/// A value line across the chart with its label.
#[derive(Debug, Clone, PartialEq)]
pub struct GridLine {
    pub y: f64,
    pub label: String,
}

/// A time label under the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub x: f64,
    pub label: String,
}

/// A series' entry in the legend, with its total over the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Legend {
    pub class: &'static str,
    pub name: &'static str,
    pub total: Option<String>,
}

/// A bar chart over time, ready to draw: in each time slot, one bar per
/// group of series, side by side, each bar the group's series stacked.
#[derive(Debug, Clone, Template)]
#[template(path = "chart.html")]
pub struct Chart {
    /// What the chart shows, for screen readers (`aria-label`).
    pub label: String,
    pub bars: Vec<Bar>,
    pub grid: Vec<GridLine>,
    pub ticks: Vec<Tick>,
    pub legend: Vec<Legend>,
    pub width: f64,
    pub height: f64,
    /// The plot's left, right and bottom edges.
    pub left: f64,
    pub right: f64,
    pub bottom: f64,
}

impl Chart {
    /// Returns a chart of what is drawn in the frame every chart shares.
    fn framed(
        label: &str,
        bars: Vec<Bar>,
        grid: Vec<GridLine>,
        ticks: Vec<Tick>,
        legend: Vec<Legend>,
    ) -> Self {
        Self {
            label: label.to_owned(),
            bars,
            grid,
            ticks,
            legend,
            width: WIDTH,
            height: HEIGHT,
            left: LEFT,
            right: WIDTH - RIGHT,
            bottom: HEIGHT - BOTTOM,
        }
    }
}

/// Returns the smallest "round" number (1, 2 or 5 times a power of ten) at
/// least `value`, and at least 1.
fn round_up(value: u64) -> u64 {
    let mut unit = 1;
    loop {
        for step in [1, 2, 5] {
            if step * unit >= value {
                return step * unit;
            }
        }
        unit *= 10;
    }
}

/// Returns a chart of `series` stacked per bucket, the buckets starting at
/// `starts` (one bucket per start, oldest first).
pub fn stacked(label: &str, starts: &[Timestamp], series: &[Series]) -> Chart {
    grouped(label, starts, &[series])
}

/// Returns a chart with one bar per group in each bucket, side by side, so
/// that each group is read on its own (created beside finished, say); a
/// group's series are stacked in its bar. The buckets start at `starts`
/// (oldest first).
pub fn grouped(label: &str, starts: &[Timestamp], groups: &[&[Series]]) -> Chart {
    let slots: Vec<String> = starts.iter().map(|start| format::clock(*start)).collect();
    labelled(label, &slots, groups)
}

/// Returns a chart with one bar per group in each slot, side by side, as
/// [`grouped`], the slots named by `slots` (in order) rather than by times.
pub fn labelled(label: &str, slots: &[String], groups: &[&[Series]]) -> Chart {
    let buckets = slots.len().max(1);
    let value = |s: &Series, index: usize| s.values.get(index).copied().unwrap_or(0);
    let highest = groups
        .iter()
        .flat_map(|group| (0..slots.len()).map(|i| group.iter().map(|s| value(s, i)).sum()))
        .max()
        .unwrap_or(0);
    let top_value = round_up(highest);
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let slot = plot_width / buckets as f64;
    let bar_width = ((slot - 1.0) / groups.len().max(1) as f64).max(1.0);
    let scale = plot_height / top_value as f64;
    let mut bars = Vec::new();
    for (index, slot_label) in slots.iter().enumerate() {
        let parts: Vec<String> = groups
            .iter()
            .flat_map(|group| group.iter())
            .map(|s| format!("{} {}", value(s, index), s.name))
            .collect();
        let title = format!("{slot_label}: {}", parts.join(", "));
        for (place, group) in groups.iter().enumerate() {
            let mut base = HEIGHT - BOTTOM;
            for s in group.iter() {
                let count = value(s, index);
                if count == 0 {
                    continue;
                }
                let height = count as f64 * scale;
                base -= height;
                bars.push(Bar {
                    x: LEFT + index as f64 * slot + place as f64 * bar_width,
                    y: base,
                    width: bar_width,
                    height,
                    class: s.class,
                    title: title.clone(),
                });
            }
        }
    }
    let grid = [0, top_value / 2, top_value]
        .into_iter()
        .map(|value| GridLine {
            y: HEIGHT - BOTTOM - value as f64 * scale,
            label: format::count(value),
        })
        .collect();
    let slot_middle = (slot - 1.0).max(1.0) / 2.0;
    let ticks = (0..buckets)
        .step_by((buckets / 4).max(1))
        .chain(std::iter::once(buckets - 1))
        .filter_map(|index| {
            Some(Tick {
                x: LEFT + index as f64 * slot + slot_middle,
                label: slots.get(index)?.clone(),
            })
        })
        .collect();
    let legend = groups
        .iter()
        .flat_map(|group| group.iter())
        .map(|s| Legend {
            class: s.class,
            name: s.name,
            total: s.summed.then(|| format::count(s.values.iter().sum())),
        })
        .collect();
    Chart::framed(label, bars, grid, ticks, legend)
}

/// One version's rewards in one mode, for [`reward_bands`]: the band from
/// the 10th to the 90th percentile and the mean.
#[derive(Debug, Clone, PartialEq)]
pub struct RewardBand {
    /// The version's slot on the axis (its index in the chart's labels).
    pub slot: usize,
    pub low: f64,
    pub mean: f64,
    pub high: f64,
    pub title: String,
}

/// The bands of one mode.
#[derive(Debug, Clone)]
pub struct BandSeries {
    pub name: &'static str,
    /// The style sheet's class of its bands.
    pub class: &'static str,
    pub bands: Vec<RewardBand>,
}

/// The class of the mean's mark across a band.
const MEAN_CLASS: &str = "beat";
/// The least height of a band, in SVG units: three times the mean's mark.
const MIN_BAND_HEIGHT: f64 = 6.0;

/// Returns a chart of reward bands by version: one slot per label (the
/// versions in order), in each a band per series side by side (train beside
/// val), from its 10th to its 90th percentile, with a mark at its mean. The
/// value axis spans the values shown (and 0).
pub fn reward_bands(label: &str, labels: &[String], series: &[BandSeries]) -> Chart {
    let values = series
        .iter()
        .flat_map(|s| s.bands.iter())
        .flat_map(|band| [band.low, band.mean, band.high]);
    let (mut lowest, mut highest) = values.fold((0.0_f64, 0.0_f64), |(lo, hi), value| {
        (lo.min(value), hi.max(value))
    });
    if highest <= lowest {
        highest = lowest + 1.0;
    }
    let padding = (highest - lowest) * 0.05;
    highest += padding;
    if lowest < 0.0 {
        lowest -= padding;
    }
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let slot = plot_width / labels.len().max(1) as f64;
    let band_width = ((slot - 1.0) / series.len().max(1) as f64).max(1.0);
    let y = |value: f64| HEIGHT - BOTTOM - (value - lowest) / (highest - lowest) * plot_height;
    let mut bars = Vec::new();
    for (place, s) in series.iter().enumerate() {
        for band in &s.bands {
            let x = LEFT + band.slot as f64 * slot + place as f64 * band_width;
            // A band narrower than the mean's mark is drawn around its
            // middle at the least height, so that its colour shows.
            let (top, bottom) = (y(band.high), y(band.low));
            let height = (bottom - top).max(MIN_BAND_HEIGHT);
            bars.push(Bar {
                x,
                y: (top + bottom - height) / 2.0,
                width: band_width,
                height,
                class: s.class,
                title: band.title.clone(),
            });
            bars.push(Bar {
                x,
                y: y(band.mean) - 1.0,
                width: band_width,
                height: 2.0,
                class: MEAN_CLASS,
                title: band.title.clone(),
            });
        }
    }
    let grid = [lowest, (lowest + highest) / 2.0, highest]
        .into_iter()
        .map(|value| GridLine {
            y: y(value),
            label: format!("{value:.2}"),
        })
        .collect();
    let slot_middle = (slot - 1.0).max(1.0) / 2.0;
    let ticks = (0..labels.len())
        .step_by((labels.len() / 8).max(1))
        .map(|index| Tick {
            x: LEFT + index as f64 * slot + slot_middle,
            label: labels[index].clone(),
        })
        .collect();
    let legend = series
        .iter()
        .map(|s| Legend {
            class: s.class,
            name: s.name,
            total: None,
        })
        .chain(std::iter::once(Legend {
            class: MEAN_CLASS,
            name: "mean",
            total: None,
        }))
        .collect();
    Chart::framed(label, bars, grid, ticks, legend)
}

/// A bar placed on a time axis from `start` to `end`, in hundredths of the
/// axis (`x` and `width` in 0..1000), for the waterfall and the attempts
/// timeline (drawn in SVGs whose view box is 1000 wide).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub x: f64,
    pub width: f64,
}

/// A time axis from `from` to `to`.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    from: i64,
    length: f64,
}

impl Axis {
    /// Returns the axis from `from` to `to` (at least a microsecond long).
    pub fn new(from: Timestamp, to: Timestamp) -> Self {
        Self {
            from: from.0,
            length: ((to.0 - from.0) as f64).max(1_000.0),
        }
    }

    /// Places `start`..`end` on the axis: at least 0.4 % wide, so that an
    /// instant stays visible.
    pub fn place(&self, start: Timestamp, end: Timestamp) -> Span {
        let x = ((start.0 - self.from) as f64 / self.length * 1000.0).clamp(0.0, 996.0);
        let width = ((end.0 - start.0) as f64 / self.length * 1000.0)
            .max(4.0)
            .min(1000.0 - x);
        Span { x, width }
    }

    /// Places an instant on the axis.
    pub fn at(&self, time: Timestamp) -> f64 {
        ((time.0 - self.from) as f64 / self.length * 1000.0).clamp(0.0, 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reward_bands_sit_side_by_side_with_the_mean_inside() {
        let band = |slot, low, mean, high| RewardBand {
            slot,
            low,
            mean,
            high,
            title: String::new(),
        };
        let chart = reward_bands(
            "reward by version",
            &["1".to_owned(), "2".to_owned()],
            &[
                BandSeries {
                    name: "train",
                    class: "ok",
                    bands: vec![band(0, 0.0, 0.25, 0.5), band(1, 0.5, 0.75, 1.0)],
                },
                BandSeries {
                    name: "val",
                    class: "run",
                    bands: vec![band(1, -0.5, 0.0, 0.5)],
                },
            ],
        );
        assert_eq!(chart.bars.len(), 6, "a band and its mean mark each");
        let (train_1, train_2, val_2) = (&chart.bars[0], &chart.bars[2], &chart.bars[4]);
        assert!(
            train_1.x < train_2.x && train_2.x < val_2.x,
            "by slot, then series"
        );
        assert!(train_2.y < train_1.y, "a higher reward draws higher");
        let mean = &chart.bars[1];
        assert!(mean.y > train_1.y && mean.y < train_1.y + train_1.height);
        let labels: Vec<&str> = chart.grid.iter().map(|g| g.label.as_str()).collect();
        assert!(
            labels[0].starts_with('-'),
            "the axis reaches below zero: {labels:?}"
        );
        assert_eq!(chart.legend.last().map(|l| l.name), Some("mean"));
        let narrow = reward_bands(
            "one reward",
            &["1".to_owned()],
            &[BandSeries {
                name: "val",
                class: "run",
                bands: vec![band(0, 0.5, 0.5, 0.5)],
            }],
        );
        let (band, mean) = (&narrow.bars[0], &narrow.bars[1]);
        assert_eq!(
            band.height, MIN_BAND_HEIGHT,
            "a band of one value still shows"
        );
        assert!(band.y < mean.y && mean.y + mean.height < band.y + band.height);
    }

    #[test]
    fn scales_round_up_and_bars_stack() {
        assert_eq!(round_up(0), 1);
        assert_eq!(round_up(3), 5);
        assert_eq!(round_up(11), 20);
        assert_eq!(round_up(500), 500);
        let starts: Vec<Timestamp> = (0..4).map(|m| Timestamp(m * 60_000_000_000)).collect();
        let chart = stacked(
            "finished per minute",
            &starts,
            &[
                Series {
                    name: "succeeded",
                    class: "ok",
                    values: vec![1, 0, 3, 0],
                    summed: true,
                },
                Series {
                    name: "failed",
                    class: "bad",
                    values: vec![1, 0, 0, 0],
                    summed: true,
                },
            ],
        );
        assert_eq!(chart.bars.len(), 3, "zero values draw nothing");
        let (first, second) = (&chart.bars[0], &chart.bars[1]);
        assert_eq!(first.x, second.x, "stacked in one slot");
        assert!((first.y - (second.y + second.height)).abs() < 1e-9);
        assert_eq!(chart.grid.last().unwrap().label, "5");
        assert_eq!(chart.legend[0].total.as_deref(), Some("4"));
        assert!(
            first.title.contains("1 succeeded, 1 failed"),
            "{}",
            first.title
        );
        let html = chart.render().unwrap();
        assert!(
            html.starts_with("<svg") && html.contains("<title>"),
            "{html}"
        );
    }

    #[test]
    fn groups_stand_side_by_side_on_one_scale() {
        let starts: Vec<Timestamp> = (0..2).map(|m| Timestamp(m * 60_000_000_000)).collect();
        let series = |name, values| Series {
            name,
            class: "ok",
            values,
            summed: true,
        };
        let created = [series("created", vec![8, 0])];
        let finished = [
            series("succeeded", vec![4, 0]),
            series("failed", vec![1, 0]),
        ];
        let chart = grouped("per minute", &starts, &[&created, &finished]);
        assert_eq!(chart.bars.len(), 3);
        let (created, succeeded, failed) = (&chart.bars[0], &chart.bars[1], &chart.bars[2]);
        assert!(
            created.x + created.width <= succeeded.x + 1e-9,
            "beside, not on top"
        );
        assert_eq!(succeeded.x, failed.x, "a group stacks in its bar");
        // The scale is the highest bar (8 created), not 8 + 5.
        assert_eq!(chart.grid.last().unwrap().label, "10");
        let ratio = created.height / (succeeded.height + failed.height);
        assert!((ratio - 8.0 / 5.0).abs() < 1e-9, "{ratio}");
        assert!((succeeded.y + succeeded.height - (HEIGHT - BOTTOM)).abs() < 1e-9);
        assert_eq!(chart.legend.len(), 3);
    }

    #[test]
    fn an_axis_keeps_instants_visible() {
        let axis = Axis::new(Timestamp(0), Timestamp(1_000_000));
        assert_eq!(axis.place(Timestamp(0), Timestamp(500_000)).width, 500.0);
        let instant = axis.place(Timestamp(999_000), Timestamp(999_000));
        assert!(instant.width > 0.0 && instant.x + instant.width <= 1000.0);
        assert_eq!(axis.at(Timestamp(2_000_000)), 1000.0);
    }
}
