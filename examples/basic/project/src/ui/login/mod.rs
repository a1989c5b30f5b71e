pub mod form;
