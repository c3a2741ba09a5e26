-- Where a dataset's current contents live: 'pg' (the dataset_rows row store)
-- or 'iceberg_native' (an Iceberg table). Stamped by every ledger commit from
-- the intent's sink; NULL until the first commit. Readers of a dataset (a
-- downstream source) use it to pick the row store or the lakehouse.
ALTER TABLE datasets ADD COLUMN sink text;

-- The ledger transaction that wrote each row-store row, so a delta reader can
-- select the rows of the transactions in its window.
ALTER TABLE dataset_rows ADD COLUMN txn_id uuid;
CREATE INDEX dataset_rows_txn ON dataset_rows (dataset_id, txn_id);
