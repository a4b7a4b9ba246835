//! Dates and periods named in a question ("in October 2023", "on June 1
//! 2024", "at the end of September", "last week", "3 months ago",
//! "Christmas Eve 2023"), turned into time ranges the ranking favours.
//!
//! This never filters: `--since` is the hard filter. A period only boosts
//! records written in it. Pure: "now" is passed in.

use chrono::{Datelike, NaiveDate, TimeZone, Utc, Weekday};

const DAY: i64 = 86_400_000;

/// A holiday's date in a given year.
type DayOf = Box<dyn Fn(i32) -> Option<NaiveDate>>;

/// Time ranges named in a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// Half-open `[start, end)` ranges, Unix ms, already padded a little
    /// (people misremember a date by a day or two).
    pub ranges: Vec<(i64, i64)>,
    /// The words that named the period (month names, numbers, "last",
    /// "week"…): dropped from the word search when other words remain.
    pub words: Vec<String>,
}

impl Period {
    /// True when `ts` falls in one of the ranges.
    pub fn contains(&self, ts: i64) -> bool {
        self.ranges.iter().any(|(a, b)| (*a..*b).contains(&ts))
    }
}

const MONTHS: &[(&str, u32)] = &[
    ("january", 1),
    ("jan", 1),
    ("february", 2),
    ("feb", 2),
    ("march", 3),
    ("april", 4),
    ("apr", 4),
    ("may", 5),
    ("june", 6),
    ("jun", 6),
    ("july", 7),
    ("jul", 7),
    ("august", 8),
    ("aug", 8),
    ("september", 9),
    ("sep", 9),
    ("sept", 9),
    ("october", 10),
    ("oct", 10),
    ("november", 11),
    ("nov", 11),
    ("december", 12),
    ("dec", 12),
];

/// Words that put a month or a year in a time frame ("in May", "during 2023").
const LEADS: &[&str] = &[
    "in",
    "on",
    "of",
    "during",
    "since",
    "until",
    "till",
    "from",
    "for",
    "early",
    "late",
    "mid",
    "end",
    "beginning",
    "start",
    "middle",
    "last",
    "this",
    "around",
    "before",
    "after",
    "by",
];

fn month_of(w: &str) -> Option<u32> {
    MONTHS.iter().find(|(n, _)| *n == w).map(|(_, m)| *m)
}

/// `12`, `12th`, `1st` as a day of the month.
fn day_of(w: &str) -> Option<u32> {
    let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &w[digits.len()..];
    if !matches!(suffix, "" | "st" | "nd" | "rd" | "th") || digits.is_empty() || digits.len() > 2 {
        return None;
    }
    digits.parse().ok().filter(|d| (1..=31).contains(d))
}

fn year_of(w: &str) -> Option<i32> {
    if w.len() != 4 {
        return None;
    }
    w.parse().ok().filter(|y| (1990..=2100).contains(y))
}

fn number_word(w: &str) -> Option<i64> {
    Some(match w {
        "a" | "an" | "one" => 1,
        "two" | "couple" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        _ => return w.parse().ok().filter(|n| (1..=400).contains(n)),
    })
}

fn ms(d: NaiveDate) -> i64 {
    Utc.from_utc_datetime(&d.and_hms_opt(0, 0, 0).unwrap_or_default())
        .timestamp_millis()
}

fn month_range(y: i32, m: u32) -> Option<(NaiveDate, NaiveDate)> {
    let start = NaiveDate::from_ymd_opt(y, m, 1)?;
    let end = if m == 12 {
        NaiveDate::from_ymd_opt(y + 1, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(y, m + 1, 1)?
    };
    Some((start, end))
}

fn thanksgiving(y: i32) -> Option<NaiveDate> {
    NaiveDate::from_weekday_of_month_opt(y, 11, Weekday::Thu, 4)
}

/// The `YYYY-MM-DD` dates in `text` (year, month and day as written),
/// left to right, each standing apart from the letters, digits and `_`
/// around it. Scanned by hand: every search asks, and compiling a regex
/// for it cost a fresh process more than half a millisecond. Only ASCII
/// counts as a letter here, so a date written against CJK text is found.
fn iso_dates(text: &str) -> Vec<(&str, &str, &str)> {
    let b = text.as_bytes();
    let word = |at: Option<&u8>| at.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let mut out = Vec::new();
    let mut i = 0;
    while i + 10 <= b.len() {
        let date = digits(i..i + 4)
            && b[i + 4] == b'-'
            && digits(i + 5..i + 7)
            && b[i + 7] == b'-'
            && digits(i + 8..i + 10)
            && !word(i.checked_sub(1).and_then(|p| b.get(p)))
            && !word(b.get(i + 10));
        if date {
            // All ASCII, so these are character boundaries.
            out.push((&text[i..i + 4], &text[i + 5..i + 7], &text[i + 8..i + 10]));
            i += 10;
        } else {
            i += 1;
        }
    }
    out
}

/// Finds the periods a question names, relative to `now_ms`.
pub fn period(text: &str, now_ms: i64) -> Option<Period> {
    let now = chrono::DateTime::from_timestamp_millis(now_ms)?.date_naive();
    let lower = text.to_lowercase();
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let day_pad = 2 * DAY;
    let month_pad = DAY;
    let push_day = |ranges: &mut Vec<(i64, i64)>, d: NaiveDate| {
        ranges.push((ms(d) - day_pad, ms(d) + DAY + day_pad));
    };
    // The years to try when a month or holiday has none: recent ones first.
    let recent_years: Vec<i32> = (0..6).map(|k| now.year() - k).collect();

    for (y, m, d) in iso_dates(&lower) {
        if let (Ok(yy), Ok(mm), Ok(dd)) = (y.parse(), m.parse(), d.parse())
            && let Some(date) = NaiveDate::from_ymd_opt(yy, mm, dd)
        {
            push_day(&mut ranges, date);
            words.extend([y.to_owned(), m.to_owned(), d.to_owned()]);
        }
    }

    let toks: Vec<String> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let tok = |i: usize| toks.get(i).map(String::as_str).unwrap_or("");
    let mut used = vec![false; toks.len()];
    let mut i = 0;
    while i < toks.len() {
        let w = tok(i);
        let prev = if i > 0 { tok(i - 1) } else { "" };

        // Holidays: the day itself, in the year named after it or in recent years.
        let holiday: Option<(DayOf, usize)> = match w {
            "christmas" if tok(i + 1) == "eve" => {
                Some((Box::new(|y| NaiveDate::from_ymd_opt(y, 12, 24)), 2))
            }
            "christmas" | "xmas" => Some((Box::new(|y| NaiveDate::from_ymd_opt(y, 12, 25)), 1)),
            "halloween" => Some((Box::new(|y| NaiveDate::from_ymd_opt(y, 10, 31)), 1)),
            "valentine" | "valentines" => {
                Some((Box::new(|y| NaiveDate::from_ymd_opt(y, 2, 14)), 1))
            }
            "thanksgiving" => Some((Box::new(thanksgiving), 1)),
            "solstice" if prev == "winter" => {
                Some((Box::new(|y| NaiveDate::from_ymd_opt(y, 12, 21)), 1))
            }
            "solstice" if prev == "summer" => {
                Some((Box::new(|y| NaiveDate::from_ymd_opt(y, 6, 21)), 1))
            }
            "independence" if tok(i + 1) == "day" => {
                Some((Box::new(|y| NaiveDate::from_ymd_opt(y, 7, 4)), 2))
            }
            _ => None,
        };
        if let Some((day, len)) = holiday {
            let after = i + len;
            let year = year_of(tok(after));
            let years = match year {
                Some(y) => {
                    used[after] = true;
                    vec![y]
                }
                None if prev == "last" => vec![now.year() - 1, now.year()],
                None => recent_years.clone(),
            };
            for y in years {
                if let Some(d) = day(y) {
                    push_day(&mut ranges, d);
                }
            }
            if year.is_some() {
                words.push(tok(after).to_owned());
            }
            i = after + 1;
            continue;
        }

        // Relative periods.
        if w == "yesterday" || w == "today" {
            let back = if w == "yesterday" { 1 } else { 0 };
            push_day(&mut ranges, now - chrono::Days::new(back));
            words.push(w.to_owned());
            used[i] = true;
            i += 1;
            continue;
        }
        if matches!(w, "last" | "past" | "this" | "previous")
            && matches!(tok(i + 1), "week" | "weekend" | "month" | "year")
        {
            let unit = tok(i + 1);
            let (a, b) = match (w, unit) {
                ("this", "week" | "weekend") => (now_ms - 7 * DAY, now_ms + DAY),
                (_, "week" | "weekend") => (now_ms - 14 * DAY, now_ms),
                ("this", "month") => (ms(now.with_day(1).unwrap_or(now)), now_ms + DAY),
                (_, "month") => {
                    let first = now.with_day(1).unwrap_or(now);
                    let prev_first = (first - chrono::Days::new(1)).with_day(1).unwrap_or(first);
                    (ms(prev_first) - month_pad, ms(first) + month_pad)
                }
                ("this", _) => (
                    ms(NaiveDate::from_ymd_opt(now.year(), 1, 1).unwrap_or(now)),
                    now_ms + DAY,
                ),
                _ => (
                    ms(NaiveDate::from_ymd_opt(now.year() - 1, 1, 1).unwrap_or(now)),
                    ms(NaiveDate::from_ymd_opt(now.year(), 1, 1).unwrap_or(now)),
                ),
            };
            ranges.push((a, b));
            words.extend([w.to_owned(), unit.to_owned()]);
            used[i] = true;
            used[i + 1] = true;
            i += 2;
            continue;
        }
        if let Some(n) = number_word(w)
            && tok(i + 2) == "ago"
        {
            let unit = match tok(i + 1).trim_end_matches('s') {
                "day" => Some(DAY),
                "week" => Some(7 * DAY),
                "month" => Some(30 * DAY),
                "year" => Some(365 * DAY),
                _ => None,
            };
            if let Some(u) = unit {
                let centre = now_ms - n * u;
                let half = (u / 2).max(2 * DAY);
                ranges.push((centre - half, centre + half));
                words.extend([w.to_owned(), tok(i + 1).to_owned(), "ago".to_owned()]);
                i += 3;
                continue;
            }
        }

        // Month names, with an optional day and year, and "early"/"end of".
        if let Some(m) = month_of(w) {
            let ambiguous = matches!(w, "may" | "march" | "jan" | "sep" | "dec" | "jun" | "jul");
            let mut day: Option<u32> = None;
            let mut day_at = None;
            let mut j = i + 1;
            if let Some(d) = day_of(tok(j)) {
                day = Some(d);
                day_at = Some(j);
                j += 1;
            } else if i >= 1 && day_of(prev).is_some() {
                day = day_of(prev);
                day_at = Some(i - 1);
            } else if i >= 2 && prev == "of" && day_of(tok(i - 2)).is_some() {
                day = day_of(tok(i - 2));
                day_at = Some(i - 2);
            }
            let year = year_of(tok(j));
            let framed = day.is_some() || year.is_some() || LEADS.contains(&prev);
            if !ambiguous || framed {
                // Which part of the month: "early", "mid", "end of", "late".
                let lead = if prev == "of" && i >= 2 {
                    tok(i - 2)
                } else {
                    prev
                };
                let part = match lead {
                    "early" | "beginning" | "start" => Some((1, 11)),
                    "mid" | "middle" => Some((10, 21)),
                    "late" | "end" => Some((20, 32)),
                    _ => None,
                };
                let years = match year {
                    Some(y) => vec![y],
                    None => recent_years.clone(),
                };
                for y in years {
                    if let Some(d) = day.and_then(|d| NaiveDate::from_ymd_opt(y, m, d)) {
                        if ms(d) <= now_ms + DAY {
                            push_day(&mut ranges, d);
                        }
                    } else if day.is_none()
                        && let Some((start, end)) = month_range(y, m)
                        && ms(start) <= now_ms
                    {
                        let (a, b) = match part {
                            Some((from, to)) => (
                                ms(start) + (from - 1) * DAY,
                                (ms(start) + (to - 1) * DAY).min(ms(end)),
                            ),
                            None => (ms(start), ms(end)),
                        };
                        ranges.push((a - month_pad, b + month_pad));
                    }
                }
                words.push(w.to_owned());
                used[i] = true;
                if let Some(k) = day_at {
                    words.push(tok(k).to_owned());
                    used[k] = true;
                }
                if year.is_some() {
                    words.push(tok(j).to_owned());
                    used[j] = true;
                    j += 1;
                }
                if part.is_some() {
                    words.push(lead.to_owned());
                }
                i = j.max(i + 1);
                continue;
            }
        }

        // Seasons with a year or "last"/"this": "summer 2024", "last winter".
        let season = match w {
            "spring" => Some((3, 3)),
            "summer" => Some((6, 3)),
            "fall" | "autumn" => Some((9, 3)),
            "winter" => Some((12, 3)),
            _ => None,
        };
        if let Some((m, len)) = season
            && tok(i + 1) != "solstice"
        {
            let year = year_of(tok(i + 1)).or(match prev {
                "last" if m == 12 => Some(now.year() - 1),
                "last" => {
                    if now.month() > m + len - 1 {
                        Some(now.year())
                    } else {
                        Some(now.year() - 1)
                    }
                }
                "this" => Some(now.year()),
                _ => None,
            });
            if let Some(y) = year
                && let Some(start) = NaiveDate::from_ymd_opt(y, m, 1)
            {
                let end = start + chrono::Months::new(len);
                ranges.push((ms(start), ms(end)));
                words.push(w.to_owned());
                if year_of(tok(i + 1)).is_some() {
                    words.push(tok(i + 1).to_owned());
                    used[i + 1] = true;
                    i += 1;
                }
                i += 1;
                continue;
            }
        }

        // A year on its own, when framed: "in 2023", "during 2024".
        if let Some(y) = year_of(w)
            && !used[i]
            && LEADS.contains(&prev)
            && let Some(start) = NaiveDate::from_ymd_opt(y, 1, 1)
            && let Some(end) = NaiveDate::from_ymd_opt(y + 1, 1, 1)
        {
            ranges.push((ms(start), ms(end)));
            words.push(w.to_owned());
            used[i] = true;
        }
        i += 1;
    }
    if ranges.is_empty() {
        return None;
    }
    ranges.truncate(32);
    words.sort();
    words.dedup();
    Some(Period { ranges, words })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_stand_apart_from_letters_and_digits() {
        assert_eq!(
            iso_dates("on 2024-05-03, then (2025-01-31)-2025-02-01 x"),
            [
                ("2024", "05", "03"),
                ("2025", "01", "31"),
                ("2025", "02", "01")
            ]
        );
        // Against a CJK character or at either end of the text: found.
        assert_eq!(iso_dates("在2024-05-03讨论"), [("2024", "05", "03")]);
        assert_eq!(iso_dates("1999-12-31"), [("1999", "12", "31")]);
        // Joined to a letter, a digit or `_`, or cut short: not a date.
        for s in [
            "v2024-05-03",
            "2024-05-031",
            "12024-05-03",
            "_2024-05-03",
            "2024-05-0",
            "2024/05/03",
            "２０２４-05-03",
        ] {
            assert!(iso_dates(s).is_empty(), "{s}");
        }
    }

    fn at(s: &str) -> i64 {
        ms(NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date"))
    }

    const NOW: &str = "2025-12-01";

    fn p(q: &str) -> Option<Period> {
        period(q, at(NOW))
    }

    #[test]
    fn month_and_year() {
        let x = p("what did we decide in October 2023 about the cache").expect("period");
        assert!(x.contains(at("2023-10-15")));
        assert!(!x.contains(at("2023-12-15")) && !x.contains(at("2024-10-15")));
        assert_eq!(x.words, ["2023", "october"]);
    }

    #[test]
    fn a_day_with_and_without_ordinals() {
        for q in [
            "what happened on June 1 2024",
            "what happened on 1 June 2024",
            "on the 1st of June 2024",
        ] {
            let x = p(q).unwrap_or_else(|| panic!("{q}"));
            assert!(x.contains(at("2024-06-01")), "{q}");
            assert!(!x.contains(at("2024-06-10")), "{q}");
        }
        assert!(
            p("deploy on 2024-03-10")
                .expect("iso")
                .contains(at("2024-03-10"))
        );
    }

    #[test]
    fn month_without_year_means_recent_years() {
        let x = p("the trip in June").expect("period");
        assert!(x.contains(at("2025-06-10")) && x.contains(at("2024-06-10")));
        assert!(
            !x.contains(at("2025-12-20")),
            "a June that has not come yet"
        );
        assert!(!x.contains(at("2024-09-10")));
    }

    #[test]
    fn parts_of_a_month() {
        let x = p("at the end of September 2023").expect("period");
        assert!(x.contains(at("2023-09-26")));
        assert!(!x.contains(at("2023-09-05")));
        let e = p("early March 2024").expect("period");
        assert!(e.contains(at("2024-03-05")) && !e.contains(at("2024-03-25")));
    }

    #[test]
    fn ambiguous_month_words_need_a_frame() {
        assert!(p("it may crash").is_none());
        assert!(p("Caroline marching in the parade").is_none());
        assert!(p("in May").is_some());
        assert!(p("march 2024").is_some());
    }

    #[test]
    fn relative_periods() {
        let now = at(NOW);
        let w = p("what did we fix last week").expect("week");
        assert!(w.contains(now - 5 * DAY) && !w.contains(now - 40 * DAY));
        let m = p("three months ago").expect("ago");
        assert!(m.contains(now - 90 * DAY) && !m.contains(now - 10 * DAY));
        assert!(p("yesterday").expect("y").contains(now - DAY));
        let y = p("last year").expect("year");
        assert!(y.contains(at("2024-05-01")) && !y.contains(at("2025-05-01")));
    }

    #[test]
    fn holidays_and_seasons() {
        let x = p("what did they talk about on Christmas Eve 2023").expect("xmas");
        assert!(x.contains(at("2023-12-24")) && !x.contains(at("2024-12-24")));
        let t = p("Thanksgiving 2023").expect("thanksgiving");
        assert!(t.contains(at("2023-11-23")));
        let s = p("the summer 2024 trip").expect("summer");
        assert!(s.contains(at("2024-07-15")) && !s.contains(at("2024-10-15")));
        let sol = p("the winter solstice in December 2024").expect("solstice");
        assert!(sol.contains(at("2024-12-21")));
    }

    #[test]
    fn plain_numbers_and_words_are_not_dates() {
        assert!(p("upgrading to the 2024 edition").is_none());
        assert!(p("E0382 borrow of moved value").is_none());
        assert!(p("100 requests per minute").is_none());
        assert!(p("").is_none());
    }
}
