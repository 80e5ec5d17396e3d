// Loaded as a <script type="module"> by vendor.js's loadMomoa (not imported by the viewer, so the
// standalone bundle never includes it): momoa's parser for the editor, as one global.
import { parse, tokenize } from "/vendor/momoa/momoa.js";

window.gradtraceMomoa = { parse, tokenize };
