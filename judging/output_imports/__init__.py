"""Import of judge outputs made elsewhere (docs/JUDGE_OUTPUT_IMPORTS.md): `services` (parse,
stage, check and write one import), `jobs` (the background job row: create, run, health
check) and `apis` (the upload and job endpoints). The import_judge_outputs command calls
`services` in process."""
