//! Shared fixtures live in the bench itself; this library is empty on purpose.
