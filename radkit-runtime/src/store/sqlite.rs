pub struct SqliteStore;
pub enum Durability { Full, Normal }
