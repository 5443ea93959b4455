// Copies the console's npm libraries into console/ui/vendor, where the Go
// binary embeds them (web/console.go). There is no bundler: the console is
// plain ES modules, and each library ships an ES module build.
import { copyFileSync, mkdirSync } from "node:fs";

const files = [
  ["node_modules/@dagrejs/dagre/dist/dagre.esm.js", "console/ui/vendor/dagre.esm.js"],
  ["node_modules/@dagrejs/dagre/LICENSE", "console/ui/vendor/dagre.LICENSE.txt"],
];
mkdirSync("console/ui/vendor", { recursive: true });
for (const [from, to] of files) {
  copyFileSync(from, to);
  console.log(`${from} -> ${to}`);
}
