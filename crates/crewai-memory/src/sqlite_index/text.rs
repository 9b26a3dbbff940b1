//! The text half of the record index: every record's words in posting lists, ranked by BM25.
//!
//! Why not SQLite's FTS5, which the store used before: a recall's query is a question whose
//! words are OR-ed, so common words (`the`, `is`, `due`) make most records matches, and FTS5
//! computes `bm25()` for every one of them and joins each to its row for the scope filter. Over
//! 100,000 records that was 186 ms p50 / 304 ms p99 for a six-word question
//! (`BENCH_CHUNKS=0 cargo bench -p crewai-memory --bench ingest_recall`, 2026-12-04). Here the
//! query's posting lists are summed into one array and the filter is the index's own columns:
//! see the README's recall table for the figure after the change.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// BM25's term-frequency saturation and length normalisation, at the usual values (FTS5's and
/// Lucene's defaults).
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// The words of `text` as the index keeps them: runs of letters and digits, lowercased, with
/// diacritics removed (FTS5's `unicode61 remove_diacritics 2` rule), so `Café` finds `cafe`.
pub(crate) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(|word| {
            word.nfd()
                .filter(|c| !is_combining_mark(*c))
                .flat_map(char::to_lowercase)
                .collect()
        })
}

/// A record's distinct words with their counts, and its length in words.
#[derive(Debug, Clone, Default)]
pub(crate) struct WordCounts {
    counts: Vec<(String, u32)>,
    length: u32,
}

impl WordCounts {
    pub(crate) fn of(text: &str) -> WordCounts {
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut length = 0u32;
        for word in words(text) {
            *counts.entry(word).or_default() += 1;
            length = length.saturating_add(1);
        }
        WordCounts {
            counts: counts.into_iter().collect(),
            length,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Posting {
    position: u32,
    count: u32,
}

/// Posting lists over the positions of a collection's index. Positions are appended and
/// forgotten, never reused: a forgotten position stays in its postings until the collection
/// index compacts (it rebuilds this from [`TermIndex::rebuilt`]), and the caller's admission
/// check skips it.
#[derive(Debug, Default)]
pub(crate) struct TermIndex {
    term_ids: HashMap<String, u32>,
    /// By term id.
    postings: Vec<Vec<Posting>>,
    /// By term id: how many live positions hold the term.
    document_frequency: Vec<u32>,
    /// By position: its terms and counts (for forgetting and rebuilding).
    terms_of: Vec<Box<[(u32, u32)]>>,
    /// By position: its length in words.
    lengths: Vec<u32>,
    live: u32,
    total_length: u64,
}

impl TermIndex {
    /// Appends the next position.
    pub(crate) fn push(&mut self, counts: WordCounts) {
        let position = u32::try_from(self.lengths.len()).unwrap_or(u32::MAX);
        let mut terms = Vec::with_capacity(counts.counts.len());
        for (word, count) in counts.counts {
            let next = u32::try_from(self.postings.len()).unwrap_or(u32::MAX);
            let term = *self.term_ids.entry(word).or_insert(next);
            if term == next {
                self.postings.push(Vec::new());
                self.document_frequency.push(0);
            }
            self.postings[term as usize].push(Posting { position, count });
            self.document_frequency[term as usize] += 1;
            terms.push((term, count));
        }
        self.terms_of.push(terms.into_boxed_slice());
        self.lengths.push(counts.length);
        self.live += 1;
        self.total_length += u64::from(counts.length);
    }

    /// Takes `position` out of the statistics (its postings stay until a rebuild).
    pub(crate) fn forget(&mut self, position: usize) {
        let Some(terms) = self.terms_of.get_mut(position) else {
            return;
        };
        for (term, _) in std::mem::take(terms).iter() {
            self.document_frequency[*term as usize] -= 1;
        }
        self.live -= 1;
        self.total_length -= u64::from(self.lengths[position]);
        self.lengths[position] = 0;
    }

    /// This index over `kept` (old positions, in their new order), without forgotten ones.
    pub(crate) fn rebuilt(&self, kept: &[usize]) -> TermIndex {
        let mut postings: Vec<Vec<Posting>> = vec![Vec::new(); self.postings.len()];
        let mut terms_of = Vec::with_capacity(kept.len());
        let mut lengths = Vec::with_capacity(kept.len());
        for (new, old) in kept.iter().enumerate() {
            let position = u32::try_from(new).unwrap_or(u32::MAX);
            for (term, count) in self.terms_of[*old].iter() {
                postings[*term as usize].push(Posting {
                    position,
                    count: *count,
                });
            }
            terms_of.push(self.terms_of[*old].clone());
            lengths.push(self.lengths[*old]);
        }
        TermIndex {
            term_ids: self.term_ids.clone(),
            postings,
            document_frequency: self.document_frequency.clone(),
            terms_of,
            lengths,
            live: self.live,
            total_length: self.total_length,
        }
    }

    /// The BM25 score of every position holding a word of `query`, for the positions
    /// `admitted` accepts, unordered. Each distinct word counts once.
    pub(crate) fn scores(
        &self,
        query: &str,
        admitted: impl Fn(usize) -> bool,
    ) -> Vec<(usize, f32)> {
        let mut terms: Vec<u32> = words(query)
            .filter_map(|word| self.term_ids.get(&word).copied())
            .collect();
        terms.sort_unstable();
        terms.dedup();
        if terms.is_empty() || self.live == 0 {
            return Vec::new();
        }
        let documents = self.live as f32;
        let average_length = (self.total_length as f32 / documents).max(1.0);
        let mut sums = vec![0f32; self.lengths.len()];
        let mut touched = Vec::new();
        for term in terms {
            let frequency = self.document_frequency[term as usize] as f32;
            // Lucene's form, never negative: a word in every record still weighs a little.
            let idf = (1.0 + (documents - frequency + 0.5) / (frequency + 0.5)).ln();
            for posting in &self.postings[term as usize] {
                let at = posting.position as usize;
                let count = posting.count as f32;
                let length = self.lengths[at] as f32;
                let saturation =
                    count * (K1 + 1.0) / (count + K1 * (1.0 - B + B * length / average_length));
                if sums[at] == 0.0 {
                    touched.push(at);
                }
                sums[at] += idf * saturation;
            }
        }
        touched
            .into_iter()
            .filter(|at| admitted(*at))
            .map(|at| (at, sums[at]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(texts: &[&str]) -> TermIndex {
        let mut index = TermIndex::default();
        for text in texts {
            index.push(WordCounts::of(text));
        }
        index
    }

    fn ranked(index: &TermIndex, query: &str) -> Vec<usize> {
        let mut scores = index.scores(query, |_| true);
        scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        scores.into_iter().map(|(at, _)| at).collect()
    }

    #[test]
    fn words_are_lowercased_letters_and_digits_without_diacritics() {
        let found: Vec<String> = words("Café déjà-vu, NAÏVE x2 «ok»").collect();
        assert_eq!(found, ["cafe", "deja", "vu", "naive", "x2", "ok"]);
    }

    #[test]
    fn a_rarer_word_outranks_a_common_one() {
        let index = index(&[
            "the budget is due",
            "the invoice is due",
            "the roadmap moved",
            "the budget moved",
        ]);
        // "invoice" is in one record, "the" in all: the invoice record leads.
        assert_eq!(ranked(&index, "the invoice")[0], 1);
        // Both words of the query beat one of them.
        assert_eq!(ranked(&index, "budget due")[0], 0);
        assert!(index.scores("zebra", |_| true).is_empty());
        assert_eq!(index.scores("the", |at| at == 2).len(), 1);
    }

    #[test]
    fn forgotten_positions_leave_the_statistics_and_a_rebuild_drops_them() {
        let mut index = index(&["alpha beta", "alpha gamma", "delta"]);
        index.forget(0);
        assert_eq!(index.live, 2);
        assert_eq!(
            index.document_frequency[index.term_ids["alpha"] as usize],
            1
        );
        let rebuilt = index.rebuilt(&[1, 2]);
        let found = rebuilt.scores("alpha beta delta", |_| true);
        let mut positions: Vec<usize> = found.into_iter().map(|(at, _)| at).collect();
        positions.sort();
        assert_eq!(positions, [0, 1]);
        assert_eq!(rebuilt.total_length, 3);
    }
}
