//! GE's tensor formats as values: [`Format`], every primary format with GE's name and
//! `C_Format` number, and [`StorageFormat`], a whole format as GE stores it in a tensor
//! descriptor's `format_for_int` (primary format, sub-format, C0 code) or writes it as a
//! string (`"FRACTAL_Z:16"`).
//!
//! Uses nothing of rt2, so the model-file readers can name formats without the transfers
//! (which need element types).

use std::fmt;

use super::error::FormatError;

macro_rules! formats {
    ($( $v:ident = $num:literal, $name:literal; )*) => {
        /// A primary format: how a tensor's elements are laid out in memory, numbered as
        /// GE's `C_Format` (metadef `c_types.h`) and named as GE serializes it.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Format { $( $v = $num, )* }

        impl Format {
            /// Every primary format, in number order.
            pub const ALL: &'static [Format] = &[$( Format::$v, )*];

            /// GE's name (`TypeUtils::FormatToSerialString` of the primary format).
            pub fn name(self) -> &'static str {
                match self { $( Format::$v => $name, )* }
            }

            /// The format GE numbers `n`, if any.
            pub fn from_number(n: u8) -> Option<Format> {
                match n { $( $num => Some(Format::$v), )* _ => None }
            }

            /// The format GE names `s`; the `FORMAT_`-prefixed spelling of the C++ enum
            /// is accepted too.
            pub fn from_name(s: &str) -> Option<Format> {
                let s = s.strip_prefix("FORMAT_").unwrap_or(s);
                match s { $( $name => Some(Format::$v), )* _ => None }
            }
        }
    };
}

formats! {
    Nchw = 0, "NCHW";
    Nhwc = 1, "NHWC";
    Nd = 2, "ND";
    Nc1hwc0 = 3, "NC1HWC0";
    FractalZ = 4, "FRACTAL_Z";
    Nc1c0hwpad = 5, "NC1C0HWPAD";
    Nhwc1c0 = 6, "NHWC1C0";
    FsrNchw = 7, "FSR_NCHW";
    FractalDeconv = 8, "FRACTAL_DECONV";
    C1hwnc0 = 9, "C1HWNC0";
    FractalDeconvTranspose = 10, "FRACTAL_DECONV_TRANSPOSE";
    FractalDeconvSpStrideTrans = 11, "FRACTAL_DECONV_SP_STRIDE_TRANS";
    Nc1hwc0C04 = 12, "NC1HWC0_C04";
    FractalZC04 = 13, "FRACTAL_Z_C04";
    Chwn = 14, "CHWN";
    FractalDeconvSpStride8Trans = 15, "FRACTAL_DECONV_SP_STRIDE8_TRANS";
    Hwcn = 16, "HWCN";
    Nc1khkwhwc0 = 17, "NC1KHKWHWC0";
    BnWeight = 18, "BN_WEIGHT";
    FilterHwck = 19, "FILTER_HWCK";
    HashtableLookupLookups = 20, "HASHTABLE_LOOKUP_LOOKUPS";
    HashtableLookupKeys = 21, "HASHTABLE_LOOKUP_KEYS";
    HashtableLookupValue = 22, "HASHTABLE_LOOKUP_VALUE";
    HashtableLookupOutput = 23, "HASHTABLE_LOOKUP_OUTPUT";
    HashtableLookupHits = 24, "HASHTABLE_LOOKUP_HITS";
    C1hwncoc0 = 25, "C1HWNCoC0";
    Md = 26, "MD";
    Ndhwc = 27, "NDHWC";
    FractalZz = 28, "FRACTAL_ZZ";
    FractalNz = 29, "FRACTAL_NZ";
    Ncdhw = 30, "NCDHW";
    Dhwcn = 31, "DHWCN";
    Ndc1hwc0 = 32, "NDC1HWC0";
    FractalZ3d = 33, "FRACTAL_Z_3D";
    Cn = 34, "CN";
    Nc = 35, "NC";
    Dhwnc = 36, "DHWNC";
    FractalZ3dTranspose = 37, "FRACTAL_Z_3D_TRANSPOSE";
    FractalZnLstm = 38, "FRACTAL_ZN_LSTM";
    FractalZG = 39, "FRACTAL_Z_G";
    Reserved = 40, "RESERVED";
    All = 41, "ALL";
    Null = 42, "NULL";
    NdRnnBias = 43, "ND_RNN_BIAS";
    FractalZnRnn = 44, "FRACTAL_ZN_RNN";
    Nyuv = 45, "NYUV";
    NyuvA = 46, "NYUV_A";
    Ncl = 47, "NCL";
    FractalZWino = 48, "FRACTAL_Z_WINO";
    C1hwc0 = 49, "C1HWC0";
    FractalNzC0_16 = 50, "FRACTAL_NZ_C0_16";
    FractalNzC0_32 = 51, "FRACTAL_NZ_C0_32";
    FractalNzC0_2 = 52, "FRACTAL_NZ_C0_2";
    FractalNzC0_4 = 53, "FRACTAL_NZ_C0_4";
    FractalNzC0_8 = 54, "FRACTAL_NZ_C0_8";
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A whole format as GE keeps it in one `int32` (`format_for_int`): the primary format in
/// bits 0..8, the sub-format in bits 8..24 (FRACTAL_Z's groups, for one) and a C0 code in
/// bits 24..28, where a code `k > 0` says C0 is `2^(k-1)` and 0 says C0 follows the
/// element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StorageFormat {
    /// The layout.
    pub primary: Format,
    /// GE's sub-format: the group count of a grouped FRACTAL_Z, 0 when absent.
    pub sub_format: u16,
    /// The C0 code (0 to 15); 0 when the format does not fix C0.
    pub c0_code: u8,
}

impl StorageFormat {
    /// The primary format alone: no sub-format, C0 from the element type.
    pub const fn plain(primary: Format) -> Self {
        StorageFormat {
            primary,
            sub_format: 0,
            c0_code: 0,
        }
    }

    /// Decodes GE's `format_for_int`. Bits above the C0 code (28..32, reserved) must be
    /// zero and the primary format must be one GE numbers.
    pub fn from_int(value: i64) -> Result<Self, FormatError> {
        let bits = u32::try_from(value)
            .ok()
            .filter(|b| b >> 28 == 0)
            .ok_or(FormatError::BadFormatInt { value })?;
        let primary =
            Format::from_number((bits & 0xff) as u8).ok_or(FormatError::BadFormatInt { value })?;
        Ok(StorageFormat {
            primary,
            sub_format: ((bits >> 8) & 0xffff) as u16,
            c0_code: ((bits >> 24) & 0xf) as u8,
        })
    }

    /// Encodes as GE's `format_for_int` (GE's `GetFormatFromSubAndC0`).
    pub fn to_int(self) -> i32 {
        (self.primary as i32) | (i32::from(self.sub_format) << 8) | (i32::from(self.c0_code) << 24)
    }

    /// The C0 the format fixes (`2^(code-1)`), `None` when its code is 0.
    pub fn c0(self) -> Option<usize> {
        (self.c0_code > 0).then(|| 1usize << (self.c0_code - 1))
    }

    /// Parses GE's spelling: a primary format's name, optionally followed by `:` and the
    /// sub-format in decimal (`"FRACTAL_Z:16"`, as `FormatToSerialString` writes a format
    /// with a sub-format). GE's strings never carry the C0 code.
    pub fn parse(s: &str) -> Result<Self, FormatError> {
        let bad = || FormatError::BadFormatName {
            name: s.to_string(),
        };
        let (name, sub) = match s.split_once(':') {
            Some((name, sub)) => (name, sub.parse::<u16>().map_err(|_| bad())?),
            None => (s, 0),
        };
        let primary = Format::from_name(name).ok_or_else(bad)?;
        Ok(StorageFormat {
            primary,
            sub_format: sub,
            c0_code: 0,
        })
    }
}

impl fmt::Display for StorageFormat {
    /// GE's spelling (`"FRACTAL_Z:16"`), with rt2's `"/C0=16"` after it when the format
    /// carries a C0 code, which GE's strings leave out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.primary.name())?;
        if self.sub_format > 0 {
            write!(f, ":{}", self.sub_format)?;
        }
        if let Some(c0) = self.c0() {
            write!(f, "/C0={c0}")?;
        }
        Ok(())
    }
}
