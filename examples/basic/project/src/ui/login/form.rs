//! The login form (to be written by the `login-form` work order).
