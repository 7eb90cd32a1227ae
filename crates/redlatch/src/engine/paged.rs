//! A vector kept in pages of a fixed size: it grows a page at a time, not
//! by doubling. A table with one element per held lock (the watchdog's
//! slab, the holder record's published holds) paid up to twice its size
//! for a vector's doubling (16,384 slots for 10,000 holds: 1.64 times); in
//! pages the room left over is less than one page, whatever the count
//! (docs/BENCHMARKS.md, "Client memory per held lock").

/// Elements per page: a page of the watchdog's entries is 10 KiB.
const PAGE: usize = 256;

/// A growable sequence indexed like a `Vec`, its room a page at a time.
pub(crate) struct Paged<T> {
    /// Full pages, then the last one (the first grows by doubling up to a
    /// page, so a client holding a few locks keeps a few slots).
    pages: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Paged<T> {
    fn default() -> Paged<T> {
        Paged {
            pages: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Paged<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Adds `value` at the end (at index `len()`).
    pub(crate) fn push(&mut self, value: T) {
        match self.pages.last_mut() {
            Some(page) if page.len() < PAGE => page.push(value),
            _ => {
                // Exactly one page of room; the first starts small.
                let mut page = if self.pages.is_empty() {
                    Vec::new()
                } else {
                    Vec::with_capacity(PAGE)
                };
                page.push(value);
                self.pages.push(page);
            }
        }
        self.len += 1;
    }

    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        self.pages.get(index / PAGE)?.get(index % PAGE)
    }

    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.pages.get_mut(index / PAGE)?.get_mut(index % PAGE)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps the elements `keep` says to keep, in their order (as
    /// `Vec::retain`); pages left empty are given back.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut kept = 0;
        for index in 0..self.len {
            if keep(&self[index]) {
                if kept != index {
                    self.swap(kept, index);
                }
                kept += 1;
            }
        }
        while self.len > kept {
            self.pop();
        }
    }

    pub(crate) fn clear(&mut self) {
        self.pages.clear();
        self.len = 0;
    }

    /// Swaps the elements at `low` and `high` (`low < high`).
    fn swap(&mut self, low: usize, high: usize) {
        let (low_page, high_page) = (low / PAGE, high / PAGE);
        if low_page == high_page {
            self.pages[low_page].swap(low % PAGE, high % PAGE);
        } else {
            let (before, from) = self.pages.split_at_mut(high_page);
            std::mem::swap(&mut before[low_page][low % PAGE], &mut from[0][high % PAGE]);
        }
    }

    /// Drops the last element, and its page once empty.
    fn pop(&mut self) {
        if let Some(page) = self.pages.last_mut() {
            page.pop();
            self.len -= 1;
            if page.is_empty() {
                self.pages.pop();
            }
        }
    }

    /// Every element, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.pages.iter().flatten()
    }
}

impl<T> std::ops::Index<usize> for Paged<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        &self.pages[index / PAGE][index % PAGE]
    }
}

impl<T> std::ops::IndexMut<usize> for Paged<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        &mut self.pages[index / PAGE][index % PAGE]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_found_at_the_index_they_were_pushed_at_across_pages() {
        let mut paged = Paged::default();
        for i in 0..(3 * PAGE + 7) {
            assert_eq!(paged.len(), i);
            paged.push(i);
        }
        for i in [0, 1, PAGE - 1, PAGE, 2 * PAGE + 3, 3 * PAGE + 6] {
            assert_eq!(paged[i], i);
            assert_eq!(paged.get(i), Some(&i));
        }
        assert_eq!(paged.get(3 * PAGE + 7), None);
        *paged.get_mut(PAGE).expect("pushed") = 0;
        paged[PAGE + 1] = 0;
        assert_eq!(paged.iter().filter(|&&v| v == 0).count(), 3);
        assert_eq!(paged.iter().count(), paged.len());
    }

    #[test]
    fn retain_keeps_the_order_and_gives_back_emptied_pages() {
        let mut paged = Paged::default();
        for i in 0..(4 * PAGE) {
            paged.push(i);
        }
        paged.retain(|&v| v % 3 == 0);
        let expected: Vec<usize> = (0..(4 * PAGE)).filter(|v| v % 3 == 0).collect();
        assert_eq!(paged.iter().copied().collect::<Vec<_>>(), expected);
        assert_eq!(paged.len(), expected.len());
        assert_eq!(paged.pages.len(), expected.len().div_ceil(PAGE));
        paged.push(7);
        assert_eq!(paged[expected.len()], 7);
        paged.retain(|_| false);
        assert!(paged.is_empty());
        assert!(paged.pages.is_empty());
        paged.push(1);
        paged.clear();
        assert!(paged.is_empty());
    }

    /// The point of the pages: the room kept is the elements' and less
    /// than a page more, where a doubling vector keeps up to twice.
    #[test]
    fn the_room_kept_is_less_than_a_page_over_the_elements() {
        let mut paged = Paged::default();
        for i in 0..10_000u64 {
            paged.push(i);
        }
        let room: usize = paged.pages.iter().map(Vec::capacity).sum();
        assert!(room < 10_000 + PAGE, "{room}");
        let small: Paged<u64> = {
            let mut small = Paged::default();
            small.push(1);
            small
        };
        assert!(small.pages[0].capacity() < PAGE, "a few holds, a few slots");
    }
}
