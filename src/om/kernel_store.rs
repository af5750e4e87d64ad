//! Kernel item stores: the TBE_KERNELS, CUST_AICPU_KERNELS and SO_BINS partitions (items
//! with magic 0x5D776EFD, GE `base/common/tbe_handle_store/kernel_store.cc`,
//! `base/common/op_so_store/op_so_store.cc`) and the CUSTOM_OPS partition (items with magic
//! "KCSK" 0x4B43534B, `CustomKernelItemHeader`).
//!
//! Owns the item framing only: `{magic: u32, name_len: u32, bin_len: u32}` + name + bin,
//! back to back with no padding. It must not interpret the binaries.

use super::error::{OmError, Place, Result};

/// Item magic of kernel and .so stores.
pub const KERNEL_ITEM_MAGIC: u32 = 0x5D77_6EFD;
/// Item magic of CUSTOM_OPS ("KCSK").
pub const CUSTOM_OP_MAGIC: u32 = 0x4B43_534B;
const ITEM_HEADER: usize = 12;

/// One stored binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelItem {
    pub name: String,
    /// Offset of the binary inside the partition (set by `parse`; ignored by `write`).
    pub offset: u64,
    pub bin: Vec<u8>,
}

impl KernelItem {
    /// A fresh item.
    pub fn new(name: impl Into<String>, bin: Vec<u8>) -> Self {
        KernelItem {
            name: name.into(),
            offset: 0,
            bin,
        }
    }
    /// The binary's size in bytes.
    pub fn bin_size(&self) -> u64 {
        self.bin.len() as u64
    }
}

/// Parses a run of items that all carry `magic`. `partition` names the partition in errors.
pub fn parse(data: &[u8], magic: u32, partition: &str) -> Result<Vec<KernelItem>> {
    let mut items = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        let place =
            |at: usize| Place::new(format!("{partition} offset {at}: item {}", items.len()));
        let have = data.len() - pos;
        if have < ITEM_HEADER {
            return Err(OmError::Truncated {
                place: place(pos),
                what: "item header".into(),
                need: ITEM_HEADER as u64,
                have: have as u64,
            });
        }
        let u = |o: usize| u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
        let (m, name_len, bin_len) = (u(pos), u(pos + 4), u(pos + 8));
        if m != magic {
            return Err(OmError::container(
                place(pos),
                format!("bad item magic 0x{m:08X}, expected 0x{magic:08X}"),
            ));
        }
        let body = u64::from(name_len) + u64::from(bin_len);
        let left = (have - ITEM_HEADER) as u64;
        if body > left {
            return Err(OmError::container(
                place(pos),
                format!(
                    "item of {name_len} name + {bin_len} bin bytes runs past the end ({left} bytes left)"
                ),
            ));
        }
        let name_at = pos + ITEM_HEADER;
        let bin_at = name_at + name_len as usize;
        let end = bin_at + bin_len as usize;
        let name = String::from_utf8(data[name_at..bin_at].to_vec())
            .map_err(|_| OmError::container(place(name_at), "item name is not UTF-8"))?;
        items.push(KernelItem {
            name,
            offset: bin_at as u64,
            bin: data[bin_at..end].to_vec(),
        });
        pos = end;
    }
    Ok(items)
}

/// Writes items with `magic`; the inverse of [`parse`]. Fails if a name or binary is
/// larger than a u32 can say.
pub fn write(items: &[KernelItem], magic: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let too_big = || {
            OmError::container(
                Place::new(format!("item {i}")),
                "name or binary larger than 4 GiB",
            )
        };
        let name_len = u32::try_from(it.name.len()).map_err(|_| too_big())?;
        let bin_len = u32::try_from(it.bin.len()).map_err(|_| too_big())?;
        out.extend_from_slice(&magic.to_le_bytes());
        out.extend_from_slice(&name_len.to_le_bytes());
        out.extend_from_slice(&bin_len.to_le_bytes());
        out.extend_from_slice(it.name.as_bytes());
        out.extend_from_slice(&it.bin);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_offsets() {
        let items = vec![
            KernelItem::new("te_add_1", vec![1, 2, 3]),
            KernelItem::new("k2", vec![]),
        ];
        let b = write(&items, KERNEL_ITEM_MAGIC).unwrap();
        assert_eq!(&b[0..4], &[0xFD, 0x6E, 0x77, 0x5D]);
        let back = parse(&b, KERNEL_ITEM_MAGIC, "TBE_KERNELS").unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].name, "te_add_1");
        assert_eq!(back[0].offset, 20);
        assert_eq!(back[0].bin_size(), 3);
        assert_eq!(back[1].offset, 23 + 14);
        assert_eq!(write(&back, KERNEL_ITEM_MAGIC).unwrap(), b);
        let c = write(&items, CUSTOM_OP_MAGIC).unwrap();
        assert_eq!(&c[0..4], b"KSCK");
    }

    #[test]
    fn errors() {
        let b = write(&[KernelItem::new("a", vec![9; 4])], KERNEL_ITEM_MAGIC).unwrap();
        let e = parse(&b, CUSTOM_OP_MAGIC, "CUSTOM_OPS")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "CUSTOM_OPS offset 0: item 0: bad item magic 0x5D776EFD, expected 0x4B43534B"
        );
        let e = parse(&b[..15], KERNEL_ITEM_MAGIC, "SO_BINS")
            .unwrap_err()
            .to_string();
        assert!(e.contains("runs past the end (3 bytes left)"), "{e}");
        let e = parse(&b[..5], KERNEL_ITEM_MAGIC, "SO_BINS")
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated"), "{e}");
        for cut in 1..b.len() {
            assert!(parse(&b[..cut], KERNEL_ITEM_MAGIC, "x").is_err());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = parse(&bytes, KERNEL_ITEM_MAGIC, "x");
        }
    }
}
