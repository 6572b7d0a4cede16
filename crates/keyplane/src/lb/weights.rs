//! The weighted randomizer (thesis §5.4.3): Dcode counts from weights, and
//! the fewest-moves rebalancing of a DIP-array row.

use super::plane::NO_BACKEND;

/// One pool slot as the apportionment sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Share {
    /// Weight (0 = drain).
    pub weight: u32,
    /// Tracked states on this backend (a drained backend with states keeps a pin Dcode).
    pub tracked: u32,
}

/// Dcode count per slot (`None` = empty slot) summing to `total` when at
/// least one slot is live. Largest-remainder apportionment of `total` over
/// the weights; a live slot with tracked states gets at least one Dcode (the
/// pin, taken from the slot with the most); if every weight is 0, Dcodes are
/// shared equally.
pub(crate) fn apportion(slots: &[Option<Share>], total: usize) -> Vec<usize> {
    let mut out = vec![0usize; slots.len()];
    let live: Vec<usize> = slots.iter().enumerate().filter_map(|(i, s)| s.map(|_| i)).collect();
    if live.is_empty() {
        return out;
    }
    let wsum: u128 = live.iter().map(|&i| slots[i].map_or(0, |s| s.weight) as u128).sum();
    let w = |i: usize| -> u128 { if wsum == 0 { 1 } else { slots[i].map_or(0, |s| s.weight) as u128 } };
    let wsum = if wsum == 0 { live.len() as u128 } else { wsum };
    let mut rem: Vec<(u128, usize)> = Vec::with_capacity(live.len());
    let mut given = 0usize;
    for &i in &live {
        let num = total as u128 * w(i);
        out[i] = (num / wsum) as usize;
        given += out[i];
        rem.push((num % wsum, i));
    }
    // Largest remainders first; ties by slot index (deterministic).
    rem.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in rem.iter().take(total - given) {
        out[i] += 1;
    }
    // Pins for tracked states on backends with no Dcode.
    for &i in &live {
        if out[i] == 0 && slots[i].is_some_and(|s| s.tracked > 0) {
            let donor = live.iter().copied().max_by_key(|&j| (out[j], std::cmp::Reverse(j))).unwrap_or(i);
            if out[donor] > 1 {
                out[donor] -= 1;
                out[i] = 1;
            }
        }
    }
    out
}

/// Rewrites `row` (Dcode → slot, [`NO_BACKEND`] when unassigned) so slot `s`
/// holds exactly `target[s]` Dcodes, moving the fewest: every slot keeps
/// `min(old, target)` of its Dcodes — first those marked in `held` (they
/// hold tracked states), then its lowest others — and only the surplus (and
/// Dcodes of removed slots) moves. Returns the number of Dcodes that changed
/// slot.
pub(crate) fn rebalance(row: &mut [u16], target: &[usize], held: &[bool]) -> usize {
    let mut kept = vec![0usize; target.len()];
    let mut keep = vec![false; row.len()];
    for first in [true, false] {
        for (d, &s) in row.iter().enumerate() {
            let i = s as usize;
            if keep[d] || s == NO_BACKEND || i >= target.len() || held.get(d).copied().unwrap_or(false) != first {
                continue;
            }
            if kept[i] < target[i] {
                kept[i] += 1;
                keep[d] = true;
            }
        }
    }
    let mut free = Vec::new();
    for (d, s) in row.iter_mut().enumerate() {
        if !keep[d] {
            *s = NO_BACKEND;
            free.push(d);
        }
    }
    let mut moved = 0;
    let mut f = free.into_iter();
    for (i, &t) in target.iter().enumerate() {
        for _ in kept[i]..t {
            match f.next() {
                Some(d) => {
                    row[d] = i as u16;
                    moved += 1;
                }
                None => return moved,
            }
        }
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(weight: u32) -> Option<Share> {
        Some(Share { weight, tracked: 0 })
    }

    #[test]
    fn apportion_sums_and_follows_weights() {
        let t = apportion(&[sh(1), sh(2), None, sh(1)], 4096);
        assert_eq!(t, vec![1024, 2048, 0, 1024]);
        let t = apportion(&[sh(1), sh(1), sh(1)], 4096);
        assert_eq!(t.iter().sum::<usize>(), 4096);
        assert!(t.iter().all(|&c| c == 1365 || c == 1366));
    }

    #[test]
    fn drained_backend_with_states_keeps_one_pin() {
        let t = apportion(&[sh(1), Some(Share { weight: 0, tracked: 3 }), sh(0)], 4096);
        assert_eq!(t, vec![4095, 1, 0]);
        let t = apportion(&[sh(0), sh(0)], 16);
        assert_eq!(t, vec![8, 8]);
        assert!(apportion(&[None, None], 16).iter().all(|&c| c == 0));
    }

    #[test]
    fn rebalance_moves_only_the_surplus() {
        let mut row = vec![NO_BACKEND; 16];
        assert_eq!(rebalance(&mut row, &[8, 8], &[]), 16);
        let before = row.clone();
        // Add a third backend taking 4: exactly 4 Dcodes move.
        let moved = rebalance(&mut row, &[6, 6, 4], &[]);
        assert_eq!(moved, 4);
        assert_eq!(row.iter().zip(&before).filter(|(a, b)| a != b).count(), 4);
        for s in 0..3u16 {
            assert_eq!(row.iter().filter(|&&x| x == s).count(), [6, 6, 4][s as usize]);
        }
        // Remove slot 0 (target 0): its 6 Dcodes move, nothing else.
        let before = row.clone();
        assert_eq!(rebalance(&mut row, &[0, 9, 7], &[]), 6);
        assert_eq!(row.iter().zip(&before).filter(|(a, b)| a != b).count(), 6);
    }

    #[test]
    fn rebalance_keeps_held_dcodes() {
        let mut row = vec![NO_BACKEND; 16];
        rebalance(&mut row, &[8, 8], &[]);
        // Slot 0 holds states on Dcode 7 (its last one): shrinking to 2
        // keeps Dcode 7 and one other, and Dcode 7 never moves.
        let mut held = vec![false; 16];
        let d7 = row.iter().enumerate().filter(|&(_, &s)| s == 0).map(|(d, _)| d).nth(7).unwrap();
        held[d7] = true;
        assert_eq!(rebalance(&mut row, &[2, 8, 6], &held), 6);
        assert_eq!(row[d7], 0);
        assert_eq!(row.iter().filter(|&&s| s == 0).count(), 2);
        assert_eq!(row.iter().filter(|&&s| s == 2).count(), 6);
    }
}
