"""Building blocks every other part of iceberg-ops uses: types, schemas, snapshots, upserts, commits."""
