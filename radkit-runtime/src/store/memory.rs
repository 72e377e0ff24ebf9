pub struct MemoryStore; 
