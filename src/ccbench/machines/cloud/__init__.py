"""Cloud arms: a confidential VM and its matched plain twin launched in AWS, GCP or Azure
(docs/machines.md, "Cloud arms"). The study's [cloud] table and arms (model), the dated price table
(pricing), one adapter per cloud behind one interface (provider; aws, gcp, azure), the run's journal,
teardown and sweep (journal, lifecycle) and the guest's own word on its TEE (tee)."""
