// Vitest's setup: Testing Library's waits sized for a loaded machine, and what jsdom lacks for
// uPlot (matchMedia, a canvas context, Path2D).

import { configure } from '@testing-library/react';

// findBy…/waitFor give up after 1 s by default: too short on a loaded two-core machine.
configure({ asyncUtilTimeout: 10_000 });

// uPlot calls window.matchMedia when it is imported; jsdom has none.
if (typeof window !== 'undefined' && !window.matchMedia) {
  window.matchMedia = ((query: string) => ({
    matches: false,
    media: query,
    onchange: null,
    addListener: () => {},
    removeListener: () => {},
    addEventListener: () => {},
    removeEventListener: () => {},
    dispatchEvent: () => false,
  }));
}

// jsdom has no canvas: give uPlot a 2D context that draws nothing.
if (typeof HTMLCanvasElement !== 'undefined') {
  const noop = () => {};
  const ctx = new Proxy(
    {},
    {
      get: (_t, prop) => {
        if (prop === 'measureText') return () => ({ width: 10 });
        if (prop === 'canvas') return undefined;
        return noop;
      },
      set: () => true,
    },
  );
  HTMLCanvasElement.prototype.getContext = (() => ctx) as unknown as typeof HTMLCanvasElement.prototype.getContext;
}

// …and no Path2D, which uPlot's line paths use.
if (typeof (globalThis as { Path2D?: unknown }).Path2D === 'undefined') {
  (globalThis as { Path2D?: unknown }).Path2D = class {
    moveTo() {}
    lineTo() {}
    rect() {}
    arc() {}
    closePath() {}
    bezierCurveTo() {}
    quadraticCurveTo() {}
    addPath() {}
  };
}
