-- resourceVersions compared as numbers when both are numeric, else as strings: -1 older, 0 same, 1 newer.
local function compare_versions(new, old)
  local a, b = tonumber(new), tonumber(old)
  if not (a and b) then a, b = new, old end
  if a < b then return -1 elseif a == b then return 0 end
  return 1
end
