//! Seeded random input tensors for `rt2 run`: the same seed, input position, type and
//! shape always give the same bytes, on every machine.
//!
//! The generator is SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom
//! number generators", 2014; the seeding generator of `java.util.SplittableRandom` and of
//! the xoshiro family), a few lines of integer arithmetic with no dependency whose output
//! can never change under rt2. Each input gets its own stream, seeded from the run's seed
//! and the input's position, so giving one input from a file leaves the others as they
//! were.
//!
//! Values: floats uniform in [-1, 1) on a grid the type represents exactly (so rounding
//! never reaches 1); integers uniform in [0, 10), small and non-negative so that counts and
//! indices stay in range for most models; bools 0 or 1.

use half::{bf16, f16};

use crate::ops::{DType, HostTensor};

/// SplitMix64: a 64-bit state advanced by the golden-ratio increment, then mixed.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in [-1, 1) with `bits` bits of resolution: `m / 2^(bits-1) - 1`, which a float
    /// with a `bits`-bit significand holds exactly for every `m`.
    fn signed_unit(&mut self, bits: u32) -> f64 {
        let m = self.next_u64() >> (64 - bits);
        m as f64 / (1u64 << (bits - 1)) as f64 - 1.0
    }
}

/// SplitMix64's output function (a variant of MurmurHash3's finalizer).
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generator for input `index` of a run seeded with `seed`.
pub fn stream(seed: u64, index: usize) -> SplitMix64 {
    SplitMix64::new(mix(seed) ^ mix(!(index as u64)))
}

/// Why a random tensor cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TooLarge {
    /// The shape's byte count overflows 64 bits (or the address space).
    #[error("its byte count overflows")]
    Overflow,
    /// The host cannot give the bytes.
    #[error("its {0} bytes are more than the host's memory can give")]
    Host(u64),
}

/// A random tensor of `dtype` and `shape` (every dim known and non-negative) for input
/// `index`. Its memory is asked of the allocator first: a shape whose byte count
/// overflows, or that the host cannot hold, is an error, never an abort.
pub fn tensor(
    dtype: DType,
    shape: &[i64],
    seed: u64,
    index: usize,
) -> Result<HostTensor, TooLarge> {
    let total = dtype.tensor_bytes(shape).ok_or(TooLarge::Overflow)?;
    let bytes = usize::try_from(total).map_err(|_| TooLarge::Overflow)?;
    let n = bytes / dtype.size();
    let mut g = stream(seed, index);
    let mut data = Vec::new();
    data.try_reserve_exact(bytes)
        .map_err(|_| TooLarge::Host(total))?;
    for _ in 0..n {
        match dtype {
            DType::F32 => data.extend_from_slice(&(g.signed_unit(24) as f32).to_le_bytes()),
            DType::F64 => data.extend_from_slice(&g.signed_unit(53).to_le_bytes()),
            DType::F16 => data.extend_from_slice(&f16::from_f64(g.signed_unit(11)).to_le_bytes()),
            DType::Bf16 => data.extend_from_slice(&bf16::from_f64(g.signed_unit(8)).to_le_bytes()),
            DType::Bool => data.push((g.next_u64() >> 63) as u8),
            int => {
                let v = g.next_u64() % 10;
                data.extend_from_slice(&v.to_le_bytes()[..int.size()]);
            }
        }
    }
    Ok(HostTensor {
        dtype,
        shape: shape.to_vec(),
        data: data.into(),
    })
}

/// A tensor of zeros of `dtype` and `shape` (every dim known and non-negative), its
/// memory asked of the allocator first as [`tensor`]'s is.
pub fn zeros(dtype: DType, shape: &[i64]) -> Result<HostTensor, TooLarge> {
    let total = dtype.tensor_bytes(shape).ok_or(TooLarge::Overflow)?;
    let bytes = usize::try_from(total).map_err(|_| TooLarge::Overflow)?;
    let mut data = Vec::new();
    data.try_reserve_exact(bytes)
        .map_err(|_| TooLarge::Host(total))?;
    data.resize(bytes, 0);
    Ok(HostTensor {
        dtype,
        shape: shape.to_vec(),
        data: data.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference() {
        // The first outputs for seed 0 of the reference C implementation.
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(g.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(g.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn same_seed_same_bytes_other_seed_or_input_other_bytes() {
        for &d in DType::ALL {
            let a = tensor(d, &[4, 16], 7, 0).unwrap();
            assert_eq!(a, tensor(d, &[4, 16], 7, 0).unwrap(), "{d}");
            assert_eq!(a.data.len(), 64 * d.size());
            assert_ne!(a.data, tensor(d, &[4, 16], 8, 0).unwrap().data, "{d}");
            assert_ne!(a.data, tensor(d, &[4, 16], 7, 1).unwrap().data, "{d}");
        }
        assert_eq!(
            tensor(DType::F32, &[0, 3], 0, 0).unwrap().data,
            Vec::<u8>::new()
        );
        assert_eq!(
            tensor(DType::I64, &[], 0, 0).unwrap().data.len(),
            8,
            "a scalar"
        );
        assert_eq!(
            tensor(DType::F32, &[i64::MAX, 4], 0, 0),
            Err(TooLarge::Overflow)
        );
        // 2^60 float32s: counted, but no host holds 4 EiB; refused, not an abort.
        assert_eq!(
            tensor(DType::F32, &[1 << 30, 1 << 30], 0, 0),
            Err(TooLarge::Host(1 << 62))
        );
    }

    fn words<T>(data: &[u8], from: fn([u8; 4]) -> T) -> Vec<T> {
        data.chunks_exact(4)
            .map(|c| from(c.try_into().expect("4 bytes")))
            .collect()
    }

    #[test]
    fn values_in_range() {
        let n = 4096;
        let t = tensor(DType::F32, &[n], 1, 0).unwrap();
        let v: Vec<f32> = words(&t.data, f32::from_le_bytes);
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(
            v.iter().any(|&x| x < -0.9) && v.iter().any(|&x| x > 0.9),
            "spread"
        );
        for (d, bits) in [(DType::F16, 11), (DType::Bf16, 8)] {
            let t = tensor(d, &[n], 1, 0).unwrap();
            let mut g = stream(1, 0);
            for k in 0..n as usize {
                let raw = u16::from_le_bytes([t.data[2 * k], t.data[2 * k + 1]]);
                let x = if d == DType::F16 {
                    f16::from_bits(raw).to_f64()
                } else {
                    bf16::from_bits(raw).to_f64()
                };
                assert!((-1.0..1.0).contains(&x), "{d}: {x}");
                assert_eq!(x, g.signed_unit(bits), "{d}: exact, not rounded");
            }
        }
        let t = tensor(DType::I32, &[n], 1, 0).unwrap();
        let v: Vec<i32> = words(&t.data, i32::from_le_bytes);
        assert!(v.iter().all(|x| (0..10).contains(x)));
        assert!((0..10).all(|k| v.contains(&k)), "every value comes up");
        let t = tensor(DType::Bool, &[n], 1, 0).unwrap();
        assert!(t.data.iter().all(|&b| b <= 1));
        assert!(t.data.contains(&0) && t.data.contains(&1));
    }
}
