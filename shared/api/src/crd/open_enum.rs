//! String enums that keep unknown values.
//!
//! Karpenter's enumerated fields (operators, taint effects, consolidation policies, ...) are
//! strings on the wire. We want typed variants in Rust, but a typo in one field must not make a
//! whole manifest undeserializable: validation should be able to say *which* object and *which*
//! field is wrong. So every such enum has an `Unknown(String)` catch-all that deserialization
//! falls back to and [`validate`](super::NodePool::validate) reports. The generated JSON schema
//! still lists only the known values, so the API server rejects unknown ones up front.

/// Declares a string enum with known variants (each mapped to its wire spelling) and an
/// `Unknown(String)` variant, with serde, schemars, `Display` and `From<&str>` implementations.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value outside the known set, kept verbatim so validation can report it.
            Unknown(String),
        }

        impl $name {
            /// Wire spellings of the known variants, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($wire),+];

            /// The wire spelling of this value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $wire, )+
                    Self::Unknown(other) => other.as_str(),
                }
            }

            /// Whether this is one of the known variants.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Unknown(_))
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $( $wire => Self::$variant, )+
                    other => Self::Unknown(other.to_owned()),
                }
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                match Self::from(value.as_str()) {
                    Self::Unknown(_) => Self::Unknown(value),
                    known => known,
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <String as ::serde::Deserialize>::deserialize(deserializer).map(Self::from)
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            // Inline: CRD schemas cannot contain `$ref`s anyway, and an inline schema lets
            // field-level attributes (defaults, descriptions) land on the enum itself.
            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({
                    "type": "string",
                    "enum": Self::KNOWN,
                })
            }
        }
    };
}

pub(crate) use open_enum;
