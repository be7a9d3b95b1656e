// Debian's Chromium (CHROMIUM overrides the path), headless, as the browser tests launch it: no
// sandbox (root in CI), no background traffic, and `args` for what the test needs besides.
import { chromium } from "playwright-core";

export function launchChromium(args = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage", ...args],
  });
}
