// The live state every view reads: who the caller is, and the four watched lists.

import { useEffect, useState } from "preact/hooks";
import type {
  KaironNode,
  KaironNodeWatchEvent,
  Machine,
  MachineClaim,
  MachineClaimWatchEvent,
  MachinePool,
  MachinePoolWatchEvent,
  MachineWatchEvent,
  Whoami,
} from "./api";
import { watch } from "./watch";

export interface Live {
  machines?: Map<string, Machine>;
  pools?: Map<string, MachinePool>;
  claims?: Map<string, MachineClaim>;
  nodes?: Map<string, KaironNode>;
  error?: string;
}

/** Watches the four lists while signed in. */
export function useLive(who: Whoami | undefined): Live {
  const [live, setLive] = useState<Live>({});
  useEffect(() => {
    if (!who) return;
    const err = (error: string) => setLive((l) => ({ ...l, error }));
    const hs = [
      watch<MachineWatchEvent>("/api/v1/machines", (machines) => setLive((l) => ({ ...l, machines })), err),
      watch<MachinePoolWatchEvent>("/api/v1/machinepools", (pools) => setLive((l) => ({ ...l, pools })), err),
      watch<MachineClaimWatchEvent>("/api/v1/machineclaims", (claims) => setLive((l) => ({ ...l, claims })), err),
      watch<KaironNodeWatchEvent>("/api/v1/nodes", (nodes) => setLive((l) => ({ ...l, nodes })), err),
    ];
    return () => hs.forEach((h) => h.stop());
  }, [who]);
  return live;
}

/** The current time, ticking every second (countdowns and ages; no network). */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return now;
}
