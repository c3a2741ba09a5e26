-- Where a dataset's current contents live: 'pg' (the dataset_rows row store)
-- or 'iceberg_native' (an Iceberg table). Stamped by every ledger commit from
-- the intent's sink; NULL until the first commit. Readers of a dataset (a
-- downstream source) use it to pick the row store or the lakehouse.
ALTER TABLE datasets ADD COLUMN sink text;
