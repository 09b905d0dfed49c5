//! The backends a host picks by name: model providers (`anthropic`, `openai`,
//! `scripted:FILE`) and stores (`memory:`, `sqlite:PATH`, `postgres://…`). They are built-in crates with no
//! surface contributions; hosts reach them here, through the assembly, like every built-in.

pub use noeta_builtin_providers::{
    Notify, Price, ProviderConfig, ProviderSetupError, detect_from_env, from_settings,
    model_limits, model_price, open_provider,
};
pub use noeta_builtin_storage::{
    KNOWN_SCHEMES, OpenError, PgStore, Salvage, SalvagedTask, SqliteStore, StoreCheck, StoreUrl,
    Stores, check_file as check_store_file, check_store, open_store, salvage,
};
