//! A small deterministic generator (xorshift64*) for the benches' generated data, included with
//! `#[path]` where it is needed.

#![allow(dead_code)]

pub struct Rng(u64);

impl Rng {
    /// A generator from `state` (a zero state, which xorshift cannot leave, becomes 1).
    pub fn new(state: u64) -> Rng {
        Rng(state.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}
