"""The simulated world: people in social units (walking, standing, sitting), their events and motion.

A *unit* is a social group (a single person is a unit of one). Units walk in formation, stand in a
conversation circle, or sit on a bench. Events change them: a member leaves, the whole group walks away, a
walking group stops to talk, a newcomer approaches a standing group and joins it. Every random choice comes
from one generator, consumed in a fixed order, so the same seed gives the same world.
"""

from __future__ import annotations

import math

import numpy as np
from pairedge.measure.sim.area import Area, Bench
from pairedge.measure.sim.body import Appearance, sample_appearance
from pairedge.measure.sim.config import SimConfig
from pairedge.measure.sim.people import People
from pairedge.measure.sim.units import (
    SIT,
    STAND,
    WALK,
    Unit,
    circle_slots,
    formation_order,
    formation_slots,
    rotate,
    steer,
)


class World:
    """All people and units; :meth:`step` advances one frame.

    Args:
        config: the scene configuration.
        area: where people walk.
        rng: the behaviour stream; ``look_rng``: the appearance stream (kept separate so behaviour does not
            depend on how people look).
    """

    def __init__(
        self, config: SimConfig, area: Area, rng: np.random.Generator, look_rng: np.random.Generator
    ) -> None:
        self.cfg = config.crowd
        self.area = area
        self.rng = rng
        self.look_rng = look_rng
        self.dt = 1.0 / config.camera.fps
        self.t = 0.0
        self.people = People()
        self.units: dict[int, Unit] = {}
        self._next_uid = 1
        self._next_tid = 1
        self.benches: tuple[Bench, ...] = area.place_benches(rng, self.cfg.benches)
        self.bench_slots = [[-1, -1, -1] for _ in self.benches]
        self._populate()
        for unit in self.units.values():
            self._speakers(unit)

    # ----------------------------------------------------------------------------------------- creation
    def _new_unit(self, mode: int, anchor: np.ndarray, **kw: object) -> Unit:
        unit = Unit(self._next_uid, mode, [], np.asarray(anchor, np.float64), **kw)  # type: ignore[arg-type]
        self._next_uid += 1
        self.units[unit.uid] = unit
        return unit

    def _add_person(self, unit: Unit, pos: np.ndarray, heading: float) -> int:
        app: Appearance = sample_appearance(self.look_rng)
        row = self.people.add(self._next_tid, pos, heading, unit.uid, app, self.rng)
        self._next_tid += 1
        unit.members.append(row)
        return row

    def _group_size(self, cap: int) -> int:
        w = np.asarray(self.cfg.group_sizes, np.float64)
        n = int(self.rng.choice(4, p=w / w.sum())) + 1
        return max(1, min(n, cap))

    def _free_spot(self, radius: float) -> np.ndarray:
        """A random interior point at least ``radius`` + 1 m from everyone and every bench (best of 30
        tries)."""
        best, best_d = self.area.random_interior(self.rng), -1.0
        alive = np.concatenate([self.people.pos[self.people.alive], self._bench_points()])
        for _ in range(30):
            p = self.area.random_interior(self.rng)
            d = float(np.min(np.hypot(*(alive - p).T))) if len(alive) else 1e9
            if d > radius + 1.0:
                return p
            if d > best_d:
                best, best_d = p, d
        return best

    def _spawn_stand(self, n: int) -> None:
        slots = circle_slots(n, self.rng.uniform(0, 2 * np.pi))
        centre = self._free_spot(0.3 + 0.1 * n)
        unit = self._new_unit(STAND, centre, next_event=self.t + self.rng.exponential(self.cfg.event_s))
        for k in range(n):
            p = centre + slots[k]
            heading = math.atan2(*(centre - p)) if n > 1 else self.rng.uniform(-np.pi, np.pi)
            row = self._add_person(unit, p, heading)
            self.people.slot[row] = slots[k]

    def _spawn_sit(self, n: int) -> bool:
        b = self._free_bench()
        if b < 0:
            return False
        bench = self.benches[b]
        unit = self._new_unit(SIT, bench.pos, bench=b)
        for _ in range(min(n, 3)):
            self._add_person(unit, bench.pos, bench.heading)
        self._take_seats(unit, b)
        self.people.pos[unit.members] = bench.pos + self.people.slot[unit.members]
        self.people.prev_pos[unit.members] = self.people.pos[unit.members]
        self.people.sit[unit.members] = self.people.sit_target[unit.members] = 1.0
        return True

    def _free_bench(self) -> int:
        """A random bench nobody sits on or walks to, or -1."""
        free = [b for b, used in enumerate(self.bench_slots) if all(u == -1 for u in used)]
        return free[int(self.rng.integers(len(free)))] if free else -1

    def _take_seats(self, unit: Unit, b: int) -> None:
        """Seat the unit's members on bench b (couples at both ends); slots are offsets from the bench."""
        bench = self.benches[b]
        n = len(unit.members)
        seats = [0, 2] if n == 2 else list(range(n)) if n == 3 else [int(self.rng.integers(3))]
        unit.mode, unit.bench, unit.bench_goal, unit.anchor = SIT, b, -1, bench.pos.copy()
        unit.next_event = self.t + self.rng.exponential(1.5 * self.cfg.event_s)
        self.bench_slots[b] = [-1, -1, -1]
        for row, seat in zip(unit.members, seats, strict=True):
            self.people.slot[row] = bench.slots()[seat] - bench.pos
            self.bench_slots[b][seat] = row

    def _spawn_walk(self, n: int, *, at_edge: bool) -> None:
        start, goal = self.area.spawn(self.rng)
        target, bench = -1, -1
        r = self.rng.random()
        if r < self.cfg.approach_share:
            standing = [u.uid for u in self.units.values() if u.mode == STAND and self.area.inside(u.anchor)]
            if standing:
                target = standing[int(self.rng.integers(len(standing)))]
        elif r < self.cfg.approach_share + self.cfg.share_sit and at_edge and n <= 3:
            bench = self._free_bench()  # arrivals who will sit down keep the benches in use
            if bench >= 0:
                self.bench_slots[bench] = [-2, -2, -2]  # reserved
        if not at_edge:
            start = self.area.random_interior(self.rng)
            if target >= 0 and np.hypot(*(start - self.units[target].anchor)) < 4.0:
                target = -1  # too close to make an approach
        speed = float(np.clip(self.rng.normal(1.3, 0.15), 0.9, 1.7)) - 0.05 * (n - 1)
        d = (self.units[target].anchor if target >= 0 else goal) - start
        heading = math.atan2(d[0], d[1])
        stops = target < 0 and bench < 0 and self.rng.random() < self.cfg.stop_share
        unit = self._new_unit(
            WALK,
            start,
            heading=heading,
            speed=speed,
            goal=goal,
            target=target,
            stops=stops,
            next_event=self.t + self.rng.uniform(2, 8) if stops else math.inf,
            bench_goal=bench,
        )
        velocity = speed * np.array([math.sin(heading), math.cos(heading)])
        for off in formation_slots(n):
            row = self._add_person(unit, start + rotate(off, heading), heading)
            # already walking: as if the previous frame had been simulated
            self.people.prev_pos[row] = self.people.pos[row] - velocity * self.dt
            self.people.speed[row], self.people.walk[row] = speed, min(speed / 1.2, 1.0)

    def _populate(self) -> None:
        """The initial crowd: people split over walking / standing / sitting by the configured shares."""
        cfg = self.cfg
        shares = np.array([cfg.share_walk, cfg.share_stand, cfg.share_sit], np.float64)
        shares = shares / shares.sum() if shares.sum() > 0 else np.array([1.0, 0, 0])
        quota = np.floor(shares * cfg.people + 0.5).astype(int)
        quota[0] += cfg.people - quota.sum()
        for mode in (SIT, STAND, WALK):
            left = int(quota[mode])
            while left > 0:
                n = self._group_size(left)
                if mode == SIT and left >= 2:
                    n = max(n, 2)  # benches mostly hold couples and small groups
                if mode == SIT and not self._spawn_sit(n):
                    quota[STAND] += left  # no free bench: they stand instead
                    break
                if mode == WALK:
                    self._spawn_walk(n, at_edge=False)
                elif mode == STAND:
                    self._spawn_stand(n)
                left -= min(n, 3) if mode == SIT else n

    # ------------------------------------------------------------------------------------------- events
    def _split(self, unit: Unit, leavers: list[int]) -> None:
        unit.members = [m for m in unit.members if m not in leavers]
        centre = self.people.pos[unit.members].mean(0)  # leave away from those who stay
        if unit.bench >= 0:
            self.bench_slots[unit.bench] = [-1 if r in leavers else r for r in self.bench_slots[unit.bench]]
        anchor = self.people.pos[leavers].mean(0)
        goal = self.area.exit_away_from(self.rng, anchor, centre)
        d = goal - anchor
        new = self._new_unit(
            WALK,
            anchor,
            heading=math.atan2(d[0], d[1]),
            goal=goal,
            speed=float(np.clip(self.rng.normal(1.3, 0.15), 0.9, 1.7)),
            start_after=self.t + (0.9 if unit.mode == SIT else 0.3),
        )
        new.members = list(leavers)
        self._order_for_formation(new)
        p = self.people
        p.unit[leavers] = new.uid
        p.left_from[leavers] = unit.uid
        p.left_t[leavers] = self.t
        p.sit_target[leavers] = 0.0
        if unit.mode == STAND and len(unit.members) > 1:
            unit.reslot_at = self.t + 2.0  # close the circle once the leavers are on their way
        elif unit.mode == STAND:
            unit.anchor = self.people.pos[unit.members[0]].copy()  # the one left stays where they are

    def _walk_away(self, unit: Unit) -> None:
        if unit.bench >= 0:
            self.bench_slots[unit.bench] = [-1, -1, -1]
            unit.bench = -1
        goal = self.area.exit_away_from(self.rng, unit.anchor, unit.anchor - self.rng.standard_normal(2))
        d = goal - unit.anchor
        delay = 0.9 if unit.mode == SIT else 0.3
        unit.mode, unit.goal, unit.heading = WALK, goal, math.atan2(d[0], d[1])
        unit.speed = float(np.clip(self.rng.normal(1.25, 0.12), 0.9, 1.6))
        unit.start_after, unit.next_event, unit.target = self.t + delay, math.inf, -1
        unit.anchor = self.people.pos[unit.members].mean(0)
        self._order_for_formation(unit)
        self.people.sit_target[unit.members] = 0.0

    def _order_for_formation(self, unit: Unit) -> None:
        """Members take the formation slot nearest to where they stand."""
        order = formation_order(self.people.pos[unit.members], unit.anchor, unit.heading)
        unit.members = [unit.members[int(i)] for i in order]

    def _stop(self, unit: Unit) -> None:
        unit.mode, unit.target, unit.stops = STAND, -1, False
        unit.next_event = self.t + self.rng.exponential(self.cfg.event_s)
        self._reslot(unit)

    def _reslot(self, unit: Unit) -> None:
        """Re-form the conversation circle keeping everyone's angular order around the centre."""
        pos = self.people.pos[unit.members]
        unit.anchor = pos.mean(0) if unit.mode == STAND and unit.target < 0 else unit.anchor
        ang = np.arctan2(pos[:, 0] - unit.anchor[0], pos[:, 1] - unit.anchor[1])
        order = np.argsort(ang, kind="stable")
        unit.members = [unit.members[i] for i in order]
        slots = circle_slots(len(unit.members), float(ang[order[0]]))
        self.people.slot[unit.members] = slots

    def _event(self, unit: Unit) -> None:
        r = self.rng.random()
        n = len(unit.members)
        if unit.mode == WALK:
            if unit.stops and self.area.inside(unit.anchor, margin=-1.5):
                self._stop(unit)
            else:
                unit.next_event = self.t + 1.0
            return
        rate = 1.5 if unit.mode == SIT else 1.0
        if n >= 2 and r < 0.45:
            k = 1 if n == 2 or self.rng.random() < 0.7 else 2
            start = int(self.rng.integers(n))  # neighbours leave together (circle / bench order)
            self._split(unit, [unit.members[(start + j) % n] for j in range(k)])
        elif r < 0.75 and (n >= 2 or r < 0.6):
            self._walk_away(unit)
            return
        unit.next_event = self.t + self.rng.exponential(rate * self.cfg.event_s)

    def _merge(self, unit: Unit, target: Unit) -> None:
        target.members.extend(unit.members)
        self.people.unit[unit.members] = target.uid
        self.people.left_from[unit.members] = -1
        del self.units[unit.uid]
        self._reslot(target)

    # ----------------------------------------------------------------------------------------- stepping
    def step(self) -> None:
        """Advance the world by one frame (``1 / fps`` seconds)."""
        self.t += self.dt
        p = self.people
        p.prev_pos[:] = p.pos
        for unit in list(self.units.values()):
            if unit.uid in self.units and self.t >= unit.next_event:
                self._event(unit)
        deficit = self.cfg.people - p.count_alive()
        if deficit > 0 and self.rng.random() < self.dt * (0.8 + 0.25 * deficit):
            self._spawn_walk(self._group_size(self.cfg.people - p.count_alive()), at_edge=True)
        for unit in list(self.units.values()):
            if unit.uid in self.units:
                self._move(unit)
        p.advance(self.dt, self.t)
        if p.needs_compaction():
            self._compact()

    def _steer(self, unit: Unit, want: np.ndarray) -> np.ndarray:
        """Goal direction bent around people not in the unit and benches; the members of a group being
        approached do not repel the newcomer, nor does the bench it heads for."""
        p = self.people
        others = p.alive & (p.unit != unit.uid) & (p.unit != unit.target)
        benches = self._bench_points() if unit.bench_goal < 0 else np.zeros((0, 2))
        return steer(unit.anchor, want, np.concatenate([p.pos[others], benches]))

    def _bench_points(self) -> np.ndarray:
        """(3 B, 2) points along the benches (obstacles for walkers and for new groups)."""
        if not self.benches:
            return np.zeros((0, 2))
        return np.concatenate([b.slots() for b in self.benches])

    def _approach_point(self, unit: Unit) -> np.ndarray:
        """Where a newcomer heads: the centre of the approached group (it joins on reaching its rim)."""
        return self.units[unit.target].anchor

    def _move(self, unit: Unit) -> None:
        p = self.people
        rows = unit.members
        if unit.mode == WALK:
            if unit.target >= 0:
                tgt = self.units.get(unit.target)
                if tgt is None or tgt.mode != STAND:
                    unit.target = -1
                elif np.hypot(*(tgt.anchor - unit.anchor)) < 0.3 + 0.1 * len(tgt.members) + 0.9:
                    self._merge(unit, tgt)
                    return
            dest = self._approach_point(unit) if unit.target >= 0 else unit.goal
            if unit.bench_goal >= 0:
                bench = self.benches[unit.bench_goal]
                dest = bench.pos + 0.7 * np.array([math.sin(bench.heading), math.cos(bench.heading)])
            to_dest = dest - unit.anchor
            dist = float(np.hypot(*to_dest))
            if unit.bench_goal >= 0 and dist < 0.4:
                self._take_seats(unit, unit.bench_goal)
                return
            if (
                unit.target < 0
                and unit.bench_goal < 0
                and (dist < 0.5 or not self.area.inside(unit.anchor, margin=3.5))
            ):
                self._remove(unit)
                return
            if self.t >= unit.start_after:
                want = self._steer(unit, to_dest / max(dist, 1e-9))
                # low-pass the wanted direction (people do not zig-zag around every neighbour)
                unit.want = 0.85 * unit.want + 0.15 * want if unit.want is not None else want
                turn = (math.atan2(unit.want[0], unit.want[1]) - unit.heading + math.pi) % (
                    2 * math.pi
                ) - math.pi
                unit.heading += float(np.clip(turn, -1.2 * self.dt, 1.2 * self.dt))
                step = unit.speed * self.dt
                unit.anchor = unit.anchor + step * np.array([math.sin(unit.heading), math.cos(unit.heading)])
            if self.t < unit.start_after:
                return  # still getting up / turning to go
            slots = formation_slots(len(rows))
            targets = unit.anchor[None, :] + np.array([rotate(o, unit.heading) for o in slots])
            p.move_towards(rows, targets, (unit.speed + 0.4) * self.dt)
            p.heading[rows] = unit.heading
        elif unit.mode == STAND:
            if self.t >= unit.reslot_at:
                unit.reslot_at = math.inf
                self._reslot(unit)
            targets = unit.anchor[None, :] + (p.slot[rows] if len(rows) > 1 else np.zeros((1, 2)))
            p.move_towards(rows, targets, 0.7 * self.dt)
            if len(rows) > 1:
                d = unit.anchor[None, :] - p.pos[rows]
                p.heading[rows] = np.arctan2(d[:, 0], d[:, 1])
        else:
            bench = self.benches[unit.bench]
            seats = bench.pos[None, :] + p.slot[rows]
            p.move_towards(rows, seats, 0.6 * self.dt)
            arrived = np.hypot(*(p.pos[rows] - seats).T) < 0.02
            p.sit_target[rows] = np.where(arrived, 1.0, p.sit_target[rows])
            p.heading[rows] = bench.heading
        self._speakers(unit)

    def _speakers(self, unit: Unit) -> None:
        p = self.people
        if len(unit.members) < 2:
            p.speaker[unit.members] = False
            return
        if self.t >= unit.next_speaker or unit.speaker not in unit.members:
            unit.speaker = unit.members[int(self.rng.integers(len(unit.members)))]
            unit.next_speaker = self.t + self.rng.uniform(2.0, 5.0)
        p.speaker[unit.members] = False
        p.speaker[unit.speaker] = True

    def _remove(self, unit: Unit) -> None:
        self.people.alive[unit.members] = False
        self.people.speaker[unit.members] = False
        del self.units[unit.uid]

    def _compact(self) -> None:
        remap = self.people.compact()
        for unit in self.units.values():
            unit.members = [int(remap[m]) for m in unit.members]
            unit.speaker = int(remap[unit.speaker]) if unit.speaker >= 0 else -1
        self.bench_slots = [[int(remap[r]) if r >= 0 else r for r in s] for s in self.bench_slots]

    # ------------------------------------------------------------------------------------------ queries
    def unit_table(self) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
        """Per unit id: mode, number of members, uid of the approached unit (-1)."""
        modes = {u.uid: u.mode for u in self.units.values()}
        sizes = {u.uid: len(u.members) for u in self.units.values()}
        targets = {u.uid: u.target for u in self.units.values()}
        return modes, sizes, targets
