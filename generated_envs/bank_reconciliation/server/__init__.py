"""Server of the bank_reconciliation environment."""
