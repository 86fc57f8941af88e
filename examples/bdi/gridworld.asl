// A BDI agent that walks to the goal square of a MiniGrid room (mosaic's BDI operator).
//
// Every step mosaic turns the observation into beliefs (README, "BDI operators"): from
// MiniGrid's own view, pos(X, Y) is where the agent stands (the middle of the bottom row),
// front(X, Y) the cell it faces, goal(X, Y) and wall(X, Y) what it sees; forward is Y - 1
// and right is X + 1. do(A) is the action, by MiniGrid's names: left, right, forward, ...
// Each plan acts once, then adopts the goal again (!!) for the next observation.

!reach_goal.

// The goal is straight ahead: walk on.
+!reach_goal : goal(X, GY) & pos(X, Y) & GY < Y
    <- do(forward); !!reach_goal.

// The goal is level with the agent, on one side: turn to face it.
+!reach_goal : goal(GX, Y) & pos(X, Y) & GX > X
    <- do(right); !!reach_goal.
+!reach_goal : goal(GX, Y) & pos(X, Y) & GX < X
    <- do(left); !!reach_goal.

// The goal is ahead and off to one side, the way is free: walk on until it is level.
+!reach_goal : goal(_, GY) & pos(_, Y) & GY < Y & front(FX, FY) & not wall(FX, FY)
    <- do(forward); !!reach_goal.

// The goal is out of sight: walk on while the way is free, and turn right at a wall, which
// takes the agent round the room along its walls until the goal comes into view.
+!reach_goal : front(FX, FY) & not wall(FX, FY)
    <- do(forward); !!reach_goal.
+!reach_goal
    <- do(right); !!reach_goal.
